# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options every resilient.virt module shares: the state store and the resilience settings."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  state_store:
    description:
      - Where circuit breakers, rate limits and failover reservations keep their state, shared by
        every fork of a play and by later runs.
      - C(sqlite:///path/to/state.db) for one machine (the file is created with mode 0600),
        C(redis://[:password@]host:6379/0) or C(rediss://...) (TLS, certificate verified) for
        several machines.
      - C(redis+sentinel://[[user]:password@]host:26379[,host:26379...]/service[/db]) for a primary
        watched by Redis Sentinels (the hosts) under the master name C(service); the Sentinels'
        credentials go in C(?sentinel_username=...&sentinel_password=...). After a failover the
        next task finds the new primary.
      - C(redis+cluster://[[user]:password@]host:6379[,host:6379...]) for a Redis Cluster (any of
        its nodes).
      - C(rediss+sentinel://...) and C(rediss+cluster://...) use TLS with certificates and host
        names verified; add C(?ssl_ca_certs=/path/ca.pem) for a private CA.
      - Passwords in the URL never appear in results, logs or errors.
      - Defaults to the environment variable E(RESILIENT_VIRT_STATE_STORE), else
        C(sqlite:///~/.ansible/resilient_virt/state.db).
    type: str
  store_failure:
    description:
      - What the task does when the state store is unreachable (refuses connections, does not
        answer within O(resilience.store_timeout), stays locked or is damaged).
      - V(open) runs the task on, with the circuit breakers and rate limits of its providers kept
        in the task's own memory (unseen by other tasks and controllers), and a warning that names
        the store; the task publishes no C(resilient_virt_breakers) fact then.
      - V(closed) fails the task at once with C(Unavailable) naming the store.
      - Either way no store operation waits longer than O(resilience.store_timeout), and records
        that live in the store (failover reservations, backup records, fleet status, breakers set
        with M(resilient.virt.circuit_breaker)) still need it.
      - Defaults to the environment variable E(RESILIENT_VIRT_STORE_FAILURE), else V(open).
    type: str
    choices: [open, closed]
  resilience:
    description:
      - Retry, circuit breaker, rate limit and timeout settings for every provider call of the task.
      - Each key falls back to its environment variable, then to the retry preset, then to the
        built-in default. Durations accept seconds as a number or strings such as C(100ms), C(30s), C(4m).
      - Every setting has a valid range (for example O(resilience.reset_timeout) at most 7 days, the
        operation timeouts at most 1 day); a value outside it fails the task with C(InvalidSpec)
        before anything is stored or called.
      - Settable once for all modules through C(module_defaults) with the C(group/resilient.virt.all) action group.
    type: dict
    suboptions:
      retry_preset:
        description:
          - C(default) is 5 attempts, 0.5 s first delay, 30 s cap, x2; C(aggressive) 10, 0.1 s, x1.5;
            C(conservative) 3, 1 s, x3; C(none) one attempt only.
          - Environment E(RESILIENT_VIRT_RETRY_PRESET).
        type: str
        choices: [default, aggressive, conservative, none]
      max_attempts:
        description: Attempts per call, the first included. Environment E(RESILIENT_VIRT_RETRY_MAX_ATTEMPTS).
        type: int
      base_delay:
        description: Delay before the first retry. Environment E(RESILIENT_VIRT_RETRY_BASE_DELAY).
        type: raw
      max_delay:
        description: Cap on one delay. Environment E(RESILIENT_VIRT_RETRY_MAX_DELAY).
        type: raw
      multiplier:
        description: Growth of the delay per attempt. Environment E(RESILIENT_VIRT_RETRY_MULTIPLIER).
        type: float
      deadline:
        description:
          - Overall time for one call, retries included. When time remains but the next delay would
            pass it, one last attempt is made at the deadline. Environment E(RESILIENT_VIRT_RETRY_DEADLINE).
        type: raw
      failure_threshold:
        description:
          - Consecutive failures that show the provider is unhealthy (unavailable, timed out) before
            its circuit breaker opens. Environment E(RESILIENT_VIRT_CB_FAILURE_THRESHOLD).
        type: int
      reset_timeout:
        description:
          - Time an open breaker rejects calls, counted from the moment it opened, before it lets
            probes through. Environment E(RESILIENT_VIRT_CB_RESET_SECONDS).
        type: raw
      half_open_max_calls:
        description: Probes allowed at once while half-open. Environment E(RESILIENT_VIRT_CB_HALF_OPEN_MAX_CALLS).
        type: int
      success_threshold:
        description:
          - Successful probes that close a half-open breaker. Environment E(RESILIENT_VIRT_CB_SUCCESS_THRESHOLD).
        type: int
      rate_limit_qps:
        description:
          - Calls per second to one provider, across every process that shares the state store.
            C(0) means no limit. Environment E(RESILIENT_VIRT_RATE_LIMIT_QPS).
        type: float
      rate_limit_burst:
        description: Calls allowed at once above the steady rate. Environment E(RESILIENT_VIRT_RATE_LIMIT_BURST).
        type: int
      timeout_describe:
        description:
          - Time limit of one read call (describe, list).
          - Environment E(RESILIENT_VIRT_RPC_TIMEOUT_DESCRIBE); default 30s.
        type: raw
      timeout_mutating:
        description:
          - Time limit of one mutating call (create, delete, power).
          - Environment E(RESILIENT_VIRT_RPC_TIMEOUT_MUTATING); default 4m.
        type: raw
      timeout_validate:
        description:
          - Time limit of a connectivity check. Environment E(RESILIENT_VIRT_RPC_TIMEOUT_VALIDATE); default 10s.
        type: raw
      timeout_task_status:
        description:
          - Time limit of one task status poll.
          - Environment E(RESILIENT_VIRT_RPC_TIMEOUT_TASK_STATUS); default 10s.
        type: raw
      store_timeout:
        description:
          - Time limit of one read or write of the state store, shortened to what is left of the
            call's O(resilience.deadline). A store that does not answer in time, is locked for
            longer or is damaged fails the task with C(Unavailable) naming the store; such a failure
            is not retried and never counts against a provider's circuit breaker.
          - Environment E(RESILIENT_VIRT_STORE_TIMEOUT); default 5s, at most 10m.
        type: raw
notes:
  - Circuit breaker state is published as the fact C(resilient_virt_breakers), so it lands in the
    fact cache and shows in AWX.
"""
