"""Writers killed at random moments on every store (SQLite, Redis, Sentinel, Cluster): no
acknowledged update is lost and no record is left half-written. Real processes, each killed
with SIGKILL while it writes."""
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time

from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

_HAMMER = r"""
import sys
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

store = open_store(sys.argv[1])
keys = ["k%d" % i for i in range(4)]

def bump(current, now):
    current = current or {"a": 0, "b": 0}
    a, b = current["a"] + 1, current["b"] + 1
    return {"a": a, "b": b, "pad": "x" * (a % 50 * 200)}, a

print("ready", flush=True)
i = 0
while True:
    key = keys[i % 4]
    print(key, store.update("c", key, bump), flush=True)  # acknowledged: update() returned
    i += 1
"""


def _records_as_stored(store_url):
    """The "c" records read straight from the SQLite file or the Redis server, not the store."""
    if store_url.startswith("sqlite://"):
        db = sqlite3.connect(store_url[len("sqlite://"):])
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = db.execute("SELECT key, value FROM records WHERE namespace = 'c'").fetchall()
        db.close()
        return {key: json.loads(value) for key, value in rows}
    import redis
    from redis_topologies import raw_client

    plain = store_url.startswith("redis://")
    client = redis.Redis.from_url(store_url) if plain else raw_client(store_url)
    pattern = "resilient_virt:{c}:*" if store_url.startswith("redis+cluster") else "resilient_virt:c:*"
    try:
        return {name.decode().rsplit(":", 1)[1]: json.loads(client.get(name))
                for name in client.scan_iter(match=pattern)}
    finally:
        client.close()


def test_sigkill_during_writes_keeps_every_acknowledged_update(store_url, child_env):
    """Writers killed at random moments, 6 rounds of 4: every update a writer saw acknowledged
    is in the store, none lost to another writer (no two acknowledged the same increment), every
    record whole (no half-applied update), and at most one update per killed writer (in flight,
    never acknowledged) beyond the acknowledged ones."""
    rng = random.Random(1234)
    acknowledged = {}
    writers = 0
    for dummy in range(6):
        procs = [subprocess.Popen([sys.executable, "-c", _HAMMER, store_url], env=child_env,
                                  stdout=subprocess.PIPE) for dummy in range(4)]
        writers += len(procs)
        for proc in procs:
            assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.05, 0.3))
        for proc in procs:
            time.sleep(rng.uniform(0, 0.05))
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait()
            for line in proc.stdout.read().decode().splitlines():
                parts = line.split(" ")
                if len(parts) == 2 and parts[1].isdigit():  # a line cut by the kill is not an ack
                    acknowledged.setdefault(parts[0], []).append(int(parts[1]))
            proc.stdout.close()
            assert proc.returncode == -signal.SIGKILL
    records = _records_as_stored(store_url)
    acks = sum(len(values) for values in acknowledged.values())
    assert acks > 100, "the writers were killed before doing much"
    assert set(acknowledged) <= set(records)
    for key, values in acknowledged.items():
        assert len(set(values)) == len(values), "two writers were acknowledged one increment"
        assert max(values) <= records[key]["a"], (key, max(values), records[key])
    for key, record in records.items():
        assert record["a"] == record["b"], key
        assert record["pad"] == "x" * (record["a"] % 50 * 200)
    assert acks <= sum(r["a"] for r in records.values()) <= acks + writers
    store = open_store(store_url)
    assert store.update("c", "k0", lambda cur, now: (cur, cur["a"])) == records["k0"]["a"]
    store.close()
