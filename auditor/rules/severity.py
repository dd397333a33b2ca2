"""Severity: how bad a rule's finding is, the five names in one place.

A ``str``-valued enum declared most severe first, so a member equals (and hashes like) its
name: findings, rules and reports may hold either. Order by :attr:`Severity.rank`, never by
the string itself.
"""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    """A rule's or finding's severity, most severe first."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for the most severe, counting up."""
        return _RANKS[self]

    @classmethod
    def rank_of(cls, name: str) -> int:
        """The rank of a severity name; a name that is no severity ranks after every one."""
        return _RANKS.get(name, len(_RANKS))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The severity names, most severe first."""
        return tuple(member.value for member in cls)

    @classmethod
    def parse(cls, name: str) -> Severity | None:
        """The severity called ``name`` (exactly), or None."""
        return cls._value2member_map_.get(name)  # type: ignore[return-value]


_RANKS: dict[str, int] = {member.value: rank for rank, member in enumerate(Severity)}
