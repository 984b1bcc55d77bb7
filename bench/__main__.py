"""`python -m bench`: the one entry command."""

from bench.run import main

if __name__ == '__main__':
    raise SystemExit(main())
