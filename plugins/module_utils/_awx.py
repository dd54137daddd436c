# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a task runs as part of an AWX job or in an execution environment, where the default
SQLite state store would be thrown away with the job's container.

The signs are environment variables of the task (never files of the machine, so that a test or
a user can see why): AWX and Automation Controller set ``AWX_HOST`` and ``JOB_ID`` (or
``AD_HOC_COMMAND_ID``) for every job; ansible-runner running a playbook inside a container sets
``AWX_ISOLATED_DATA_DIR`` under ``/runner/artifacts/`` (older releases also
``LAUNCHED_BY_RUNNER=1``). :func:`store_warning` turns that, when no state store is configured,
into the warning a task gives once.
"""

__all__ = ("job_platform", "store_warning", "STORE_ENV")

STORE_ENV = "RESILIENT_VIRT_STATE_STORE"
CONTAINER_ARTIFACTS = "/runner/artifacts/"


def job_platform(environ):
    """What the environment ``environ`` says the task runs in, with the variables that say so,
    or None when it shows no sign of AWX or an execution environment."""
    job = next((name for name in ("JOB_ID", "AD_HOC_COMMAND_ID") if environ.get(name)), None)
    if environ.get("AWX_HOST") and job:
        return "an AWX or Automation Controller job (AWX_HOST and %s are set)" % job
    if (environ.get("AWX_ISOLATED_DATA_DIR") or "").startswith(CONTAINER_ARTIFACTS):
        return "an execution environment (ansible-runner in a container: AWX_ISOLATED_DATA_DIR is %s...)" \
            % CONTAINER_ARTIFACTS
    if environ.get("LAUNCHED_BY_RUNNER") == "1":
        return "an execution environment (ansible-runner in a container: LAUNCHED_BY_RUNNER=1)"
    return None


def store_warning(state_store, environ):
    """The warning for a task that runs where :func:`job_platform` sees AWX or an execution
    environment while no state store is configured (neither ``state_store``, the task's option,
    nor ``RESILIENT_VIRT_STATE_STORE``); None otherwise."""
    if state_store or environ.get(STORE_ENV):
        return None
    platform = job_platform(environ)
    if platform is None:
        return None
    return ("this task runs in %s and no state store is configured: the default SQLite store "
            "lives inside the job's container and is thrown away after every job, with the circuit "
            "breakers, rate limits and failover reservations in it, so no job learns from the last "
            "one; share a Redis store between jobs - attach a credential of the 'resilient.virt state "
            "store' type (extensions/awx/credential_types/state_store.yml, which sets %s) or set "
            "state_store: redis://... (see docs/awx.md)" % (platform, STORE_ENV))
