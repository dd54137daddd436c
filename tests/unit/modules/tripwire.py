"""A plugin that records every attempt to reach a provider, for the tests that prove a bad input
is refused before any provider is contacted. Loaded by the modules run in the test's process
through ``RESILIENT_VIRT_PLUGINS=tests.unit.modules.tripwire``."""
import pluggy

REFERENCE = "tests.unit.modules.tripwire"
hookimpl = pluggy.HookimplMarker("resilient_virt")
CALLS = []  # (provider key, operation) of every attempt


@hookimpl
def resilient_virt_before_call(provider, operation, arguments):
    CALLS.append((provider.key, operation))
