"""The state store fixtures (tests/store_fixtures.py) for the tests of this directory: many
processes at once on every store (SQLite, Redis, Redis through Sentinel, a Redis Cluster).
``redis_sentinel`` here is the session's setup of the stores, not the per-test one of
tests/integration/conftest.py."""
# pylint: disable=unused-import  # fixtures, found by their names
from store_fixtures import (  # noqa: F401
    child_env, cluster_url, redis_cluster, redis_sentinel, redis_server, redis_url,
    sentinel_url, sqlite_url, store, store_url)
