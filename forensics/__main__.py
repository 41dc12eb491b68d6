"""``python -m forensics`` is the ``forensics`` command."""

from .cli import main

main()
