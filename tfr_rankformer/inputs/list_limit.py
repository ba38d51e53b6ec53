"""The most items a model's list may hold (``ModelConfig.list_limit``), checked against
the data before anything runs.

>>> limit = ListLimit(32, "its learned positional encoding's --max-positions 32",
...                   "set --max-positions {longest} or more, or --positional-encoding fixed")
>>> try:
...     limit.check(118, where="the 'train' split of data/")
... except ListLimitError as error:
...     print(error)
the model takes lists of at most 32 items (its learned positional \
encoding's --max-positions 32), but the 'train' split of data/ holds a list of 118; \
set --max-positions 118 or more, or --positional-encoding fixed
"""

from __future__ import annotations

import dataclasses


class ListLimitError(ValueError):
    """A list longer than the model can take."""


@dataclasses.dataclass(frozen=True)
class ListLimit:
    """``items`` a list holds at most, ``what`` sets it, and the flags that ``fix`` it."""

    items: int
    what: str
    fix: str = ""

    def check(self, longest: int, *, where: str) -> None:
        """Raises ``ListLimitError`` when ``where``'s ``longest`` list is over."""
        if longest <= self.items:
            return
        fix = self.fix.format(longest=longest)
        raise ListLimitError(
            f"the model takes lists of at most {self.items} items ({self.what}), but {where} "
            f"holds a list of {longest}" + (f"; {fix}" if fix else "")
        )
