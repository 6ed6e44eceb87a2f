"""``python -m envelope_ci``: the same as the ``envelope-ci`` console script."""
from .cli import console

console()
