"""State store fixtures (tests/store_fixtures.py): a SQLite file in tmp_path, a real, private
redis-server, and real Sentinel (primary, replica, three Sentinels) and Cluster (three
primaries) setups."""
# pylint: disable=unused-import  # fixtures, found by their names
from store_fixtures import (  # noqa: F401
    child_env, cluster_url, redis_cluster, redis_sentinel, redis_server, redis_url,
    sentinel_url, sqlite_url, start_redis_server, store, store_url, write_lock)
