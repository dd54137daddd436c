"""Flavor trait requirements (``trait:X=required|forbidden``) against a host's traits."""

__all__ = ("TraitNeeds", "trait_needs", "host_satisfies")


class TraitNeeds(tuple):
    """(required, forbidden) frozensets of trait names."""

    __slots__ = ()

    @property
    def required(self):
        return self[0]

    @property
    def forbidden(self):
        return self[1]


def trait_needs(extra_specs):
    """Read ``trait:NAME`` extra specs; values other than required/forbidden are ignored."""
    required, forbidden = set(), set()
    for key, value in (extra_specs or {}).items():
        if not key.startswith("trait:") or not isinstance(value, str):
            continue
        name, value = key[len("trait:"):], value.strip().lower()
        if value == "required":
            required.add(name)
        elif value == "forbidden":
            forbidden.add(name)
    return TraitNeeds((frozenset(required), frozenset(forbidden)))


def host_satisfies(host_traits, needs):
    """True when the host has every required trait and none of the forbidden ones."""
    return needs.required <= host_traits and not (needs.forbidden & host_traits)
