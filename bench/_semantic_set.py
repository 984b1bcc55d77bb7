"""A small labelled set for recall by meaning, written for this project (bench/semantic.py runs it).

Six support-style conversations, each a user telling an assistant a dozen things over time. Then
questions a later turn might ask, each aimed at one earlier user message:

- `PARAPHRASES`: the same thing in other words, sharing as few words with the message as a natural
  question does (a user who said "keep answers brief" later asks for "short responses");
- `EXACT_IDS`: questions quoting an identifier the message holds (an order number, a ticket id),
  where the words are what matters.

Each question names its conversation and the index of the user message it is after.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ('CONVERSATIONS', 'EXACT_IDS', 'PARAPHRASES', 'Question')


CONVERSATIONS: dict[str, list[str]] = {
    'travel': [
        'We are planning a hiking trip to Norway at the end of August.',
        'My partner is vegetarian, so restaurants need meat-free dishes.',
        'Our flight is LH 1432 from Frankfurt, booking reference QX7-PLM.',
        'I get seasick easily, so I would rather avoid long ferry rides.',
        'The budget for the whole holiday is around four thousand euros.',
        'We want to see the fjords near Bergen and maybe Trolltunga.',
        'I forgot to renew my passport, it expires in September.',
        'Please book a cabin with a sauna if possible.',
        'My knee was operated on last year, steep descents hurt.',
        'We will rent an electric car at the airport.',
        'Travel insurance policy number is TRV-88213.',
        'We prefer quiet places away from tourist crowds.',
    ],
    'laptop': [
        'My laptop fan gets very loud whenever I join video calls.',
        'The battery drains from full to empty in about ninety minutes.',
        'The serial number on the bottom sticker is SN-5521-B.',
        'I spilled coffee on the keyboard two weeks ago.',
        'Since the last update the screen flickers at low brightness.',
        'I mostly use it for spreadsheets and photo editing.',
        'The support ticket I opened is INC-40417.',
        'The charger gets hot to the touch after an hour.',
        'Bluetooth headphones keep disconnecting every few minutes.',
        'I bought it in March 2024 with a three year warranty.',
        'The trackpad sometimes clicks by itself.',
        'I back up my files to an external disk every Friday.',
    ],
    'shop': [
        'My order number is ZEBRA-93, the blue kettle.',
        'The parcel was shipped to my office in Berlin.',
        'The kettle arrived with a dent on its side.',
        'I paid with a gift card and the rest by credit card.',
        'Invoice INV-2291 shows the wrong VAT number for my company.',
        'Please never call me, I prefer email.',
        'I also ordered two mugs, order BR-7710, still not here.',
        'I would like a replacement rather than a refund.',
        'The courier left the box in the rain at the door.',
        'My loyalty account is registered under my maiden name.',
        'I am moving to Hamburg next month.',
        'The mugs were meant as a birthday present for Friday.',
    ],
    'health': [
        'My daughter has a severe peanut allergy.',
        'I am trying to lower my cholesterol this year.',
        'I cannot drink milk, it upsets my stomach.',
        'I run five kilometres every morning before work.',
        'The doctor prescribed atorvastatin, prescription RX-3307.',
        'I sleep badly and wake up around three at night.',
        'I want meals that take less than twenty minutes to cook.',
        'My son refuses to eat anything green.',
        'We eat fish twice a week.',
        'I gave up sugar in my coffee in January.',
        'My blood pressure reading was 140 over 90 last week.',
        'Lunch at the office is usually a sandwich from the bakery.',
    ],
    'home': [
        'We are renovating the bathroom in our flat.',
        'The landlord must approve any change to the walls.',
        'The quote from the plumber was QTE-6620 for 3200 euros.',
        'I want a walk-in shower instead of the old bathtub.',
        'There is black mould behind the washing machine.',
        'The electrician can only come on Tuesdays.',
        'Our cat is scared of loud drilling noise.',
        'The tiles should be light grey and matte.',
        'The hot water boiler is twenty years old.',
        'We need the work finished before our baby is due in May.',
        'The building has no lift, materials go up four floors.',
        'Heating bills doubled last winter.',
    ],
    'job': [
        'I am looking for a new job as a data engineer.',
        'I do not want to commute more than thirty minutes.',
        'My current salary is sixty-five thousand a year.',
        'I applied to Northwind, application id APP-51234.',
        'I prefer a company with a four day week.',
        'My strongest skills are Python and SQL.',
        'I have a job interview on Thursday at ten.',
        'I left my last job because of constant overtime.',
        'I would like to mentor junior colleagues.',
        'My notice period is three months.',
        'I speak German and Spanish fluently.',
        'Remote work two days a week would be ideal.',
    ],
}
"""Each conversation's user messages, in order; every one is answered by the assistant."""

REPLY = 'Thanks, I have noted that.'
"""The assistant's answer to every message: the same words, so they rank alike and say nothing."""


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    target: int
    """Index of the user message in `CONVERSATIONS[conversation]` the question is after."""


PARAPHRASES: tuple[Question, ...] = (
    Question('travel', 'which country are we going walking in', 0),
    Question('travel', 'food restrictions of the person I travel with', 1),
    Question('travel', 'boat crossings make me ill', 3),
    Question('travel', 'how much money can we spend', 4),
    Question('travel', 'is my travel document still valid', 6),
    Question('travel', 'steam room in the lodging', 7),
    Question('travel', 'leg injury and going downhill', 8),
    Question('travel', 'vehicle hire on arrival', 9),
    Question('laptop', 'noisy cooling during meetings', 0),
    Question('laptop', 'how long does a charge last', 1),
    Question('laptop', 'liquid damage to the keys', 3),
    Question('laptop', 'display flicker after updating', 4),
    Question('laptop', 'power adapter heats up', 7),
    Question('laptop', 'wireless earphones drop out', 8),
    Question('laptop', 'when was the computer purchased', 9),
    Question('laptop', 'how often do I save copies of my documents', 11),
    Question('shop', 'delivery address for that package', 1),
    Question('shop', 'the item came damaged', 2),
    Question('shop', 'how did I pay', 3),
    Question('shop', 'contact me by phone or mail', 5),
    Question('shop', 'swap the product instead of money back', 7),
    Question('shop', 'package got wet outside', 8),
    Question('shop', 'relocating to another city', 10),
    Question('shop', 'gift for a celebration', 11),
    Question('health', 'nut intolerance of my child', 0),
    Question('health', 'dairy does not agree with me', 2),
    Question('health', 'daily jogging habit', 3),
    Question('health', 'trouble staying asleep', 5),
    Question('health', 'quick recipes', 6),
    Question('health', 'picky eater who avoids vegetables', 7),
    Question('health', 'seafood in our diet', 8),
    Question('health', 'what do I eat at midday', 11),
    Question('home', 'remodelling the washroom', 0),
    Question('home', 'owner permission for alterations', 1),
    Question('home', 'replace the tub', 3),
    Question('home', 'fungus near the laundry appliance', 4),
    Question('home', 'pet afraid of construction sounds', 6),
    Question('home', 'floor colour and finish', 7),
    Question('home', 'deadline because of the pregnancy', 9),
    Question('home', 'no elevator in the apartment block', 10),
    Question('job', 'what role am I hunting for', 0),
    Question('job', 'travel time to the office', 1),
    Question('job', 'how much do I earn now', 2),
    Question('job', 'shorter working week', 4),
    Question('job', 'programming languages I am good at', 5),
    Question('job', 'why did I quit', 7),
    Question('job', 'how long before I can leave my employer', 9),
    Question('job', 'working from home', 11),
)

EXACT_IDS: tuple[Question, ...] = (
    Question('travel', 'what was booking QX7-PLM for', 2),
    Question('travel', 'TRV-88213 details', 10),
    Question('laptop', 'the machine with SN-5521-B', 2),
    Question('laptop', 'status of INC-40417', 6),
    Question('shop', 'what is in ZEBRA-93', 0),
    Question('shop', 'problem with INV-2291', 4),
    Question('shop', 'where is BR-7710', 6),
    Question('health', 'RX-3307 medication', 4),
    Question('home', 'price in QTE-6620', 2),
    Question('job', 'APP-51234 company', 3),
    # The rest of the words point at another message: only the identifier tells which one is meant.
    Question('laptop', 'is the hot charger covered by ticket INC-40417', 6),
    Question('shop', 'did the dented kettle come in order BR-7710', 6),
    Question('travel', 'does policy TRV-88213 cover my knee operation', 10),
    Question('home', 'does QTE-6620 include removing the mould', 2),
    Question('health', 'is RX-3307 why I sleep badly', 4),
    Question('job', 'is the interview on Thursday for APP-51234', 3),
)
