"""A small multilingual corpus and the queries each of its messages must be found by.

Shared by the pure ranking test here and the store tests on both backends. The first six queries are
the issue's table of what analyzer version 1 could not find.
"""

from __future__ import annotations

CORPUS: dict[str, str] = {
    'ja-weather': '東京の天気は晴れです。明日は雨が降るかもしれません。',
    'zh-order': '我的订单号是 88231，请帮我查一下物流。',
    'ko-address': '배송 주소는 서울시 강남구 테헤란로 152입니다.',
    'fr-cafe': 'On se retrouve au café de la gare à midi ?',
    'de-change': 'Können Sie bitte meine Lieferadresse ändern? Die Straße hat sich geändert.',
    'fullwidth-id': 'お問い合わせ番号：ＡＢＣ－１２３（至急）',
    'mixed-id': 'Deploy failed on node tokyo東京-07 with error E42',
    'ja-katakana': 'ｶﾞｽの請求書をダウンロードしてください',
    'en-plain': 'The invoice for order 4521 was paid on Monday.',
    'el-greek': 'ΟΔΥΣΣΕΥΣ ταξίδεψε στην Ιθάκη.',
}

QUERIES: list[tuple[str, str]] = [
    ('天気', 'ja-weather'),
    ('订单', 'zh-order'),
    ('주소', 'ko-address'),
    ('cafe', 'fr-cafe'),
    ('andern', 'de-change'),
    ('ABC-123', 'fullwidth-id'),
    ('雨', 'ja-weather'),
    ('物流', 'zh-order'),
    ('서울시', 'ko-address'),
    ('Café', 'fr-cafe'),
    ('STRASSE', 'de-change'),
    ('ＡＢＣ', 'fullwidth-id'),
    ('東京-07', 'mixed-id'),
    ('E42', 'mixed-id'),
    ('ガス', 'ja-katakana'),
    ('請求書', 'ja-katakana'),
    ('invoice 4521', 'en-plain'),
    ('Οδυσσευς ιθακη', 'el-greek'),
]
"""`(query, key of the message it must find first)`."""
