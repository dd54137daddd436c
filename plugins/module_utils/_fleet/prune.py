# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prune safety: which VMs a fleet may delete because they are no longer listed, and how many.

Only a VM that carries this owner's marker (metadata ``resilient_virt_owner``, written when the
fleet created it, or when an entry adopted it with ``adopt: true``, and on no other VM) is a
candidate; a VM without it, or with another owner's, is never touched.
``max_prune`` bounds the candidates, as a count or as a percentage of the owner's VMs found;
more candidates than that refuses the whole prune before anything is deleted.
"""
import re

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY

__all__ = ("PATTERNS", "PruneLimit", "owned", "candidates", "check_limit")


_LIMIT = r"^(\d+)\s*(%?)$"
PATTERNS = (_LIMIT,)  # compiled ahead by a controller that preloads the collection


class PruneLimit:
    """``max_prune``: a count (``5``) or a percentage of the owner's VMs (``"10%"``)."""

    def __init__(self, value):
        text = str(value).strip()
        match = re.match(_LIMIT, text) if not isinstance(value, bool) else None
        if match is None or (match.group(2) and int(match.group(1)) > 100):
            raise field_error("max_prune", "%r: use a whole number of VMs (5) or a percentage of "
                              "this owner's VMs from 0%% to 100%% ('10%%')" % (value,))
        self.number = int(match.group(1))
        self.percent = bool(match.group(2))
        self.text = text

    def allowed(self, owned_count):
        """How many VMs may be pruned when the owner has ``owned_count`` VMs (rounded down)."""
        return owned_count * self.number // 100 if self.percent else self.number


def owned(vm, owner):
    return str((vm.get("metadata") or {}).get(OWNER_KEY)) == owner


def candidates(listings, owner, wanted_ids):
    """(owned VMs found, [(provider key, VM dict)] to prune): VMs of ``listings``
    ({provider key: [VM dict]}) that carry ``owner``'s marker and whose ``provider/name`` is not
    in ``wanted_ids``."""
    found, prune = 0, []
    for provider in sorted(listings):
        for vm in listings[provider]:
            if not owned(vm, owner):
                continue
            found += 1
            if "%s/%s" % (provider, vm["name"]) not in wanted_ids:
                prune.append((provider, vm))
    return found, prune


def check_limit(limit, found, prune):
    """Raise InvalidSpec naming ``max_prune`` when ``prune`` has more VMs than ``limit`` allows."""
    allowed = limit.allowed(found)
    if len(prune) <= allowed:
        return
    names = ", ".join("%s/%s" % (provider, vm["name"]) for provider, vm in prune[:10])
    if len(prune) > 10:
        names += " and %d more" % (len(prune) - 10)
    raise field_error("max_prune", "prune would delete %d VMs no longer listed (%s) but max_prune "
                      "%s allows %d of the %d VMs of this owner; nothing was changed. List them "
                      "again, or raise max_prune if they are meant to go"
                      % (len(prune), names, limit.text, allowed, found))
