# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The conformance suite of provider backends: what every backend owes the contract, as pytest
cases a backend's author runs against their own backend (docs/providers.md, "Conformance
suite"). It imports nothing of pytest; the cases are methods of :class:`ConformanceSuite`.
"""
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.backend import Backend
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.silent import SilentEndpoint
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.suite import ConformanceSuite

__all__ = ("Backend", "ConformanceSuite", "SilentEndpoint")
