"""A user's own producer, as the README's "Your own Kafka topic" runs it: JSON records of request latencies,
``{"user": {"id": 17}, "latency_ms": 12.5}``, keyed by a Zipf-distributed user id, into a Kafka topic with
kafka-python (a dependency of skewlab).  Any Kafka client in any language does the same; the engine then
reads the key and the value by their dotted fields (``--key-field user.id --value-field latency_ms``).

    python3 examples/json_producer.py --bootstrap 127.0.0.1:9092 --topic latencies --records 200000

Latencies are log-normal (median ~20 ms, a long tail), as request latencies are; users Zipf 1.2 over
``--users`` ids.  ``--rate`` paces the records per second (0: as fast as the broker takes them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap HOST:PORT")
    p.add_argument("--topic", default="latencies", help="topic to write")
    p.add_argument("--records", type=int, default=200_000, help="records to write (default 200000)")
    p.add_argument("--users", type=int, default=10_000, help="distinct user ids (default 10000)")
    p.add_argument("--rate", type=float, default=20_000, help="records per second (default 20000; 0 = unpaced)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from kafka import KafkaProducer

    rng = np.random.default_rng(args.seed)
    weights = 1.0 / np.arange(1, args.users + 1) ** 1.2
    users = rng.choice(args.users, size=args.records, p=weights / weights.sum())
    latencies = np.round(rng.lognormal(mean=3.0, sigma=0.8, size=args.records), 2)
    producer = KafkaProducer(bootstrap_servers=args.bootstrap, linger_ms=20)
    started = time.monotonic()
    for i in range(args.records):
        record = {"user": {"id": int(users[i])}, "latency_ms": float(latencies[i])}
        producer.send(args.topic, value=json.dumps(record).encode())
        if args.rate > 0 and i % 1000 == 999:
            ahead = (i + 1) / args.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    producer.flush()
    producer.close()
    print(f"wrote {args.records} records to {args.topic} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
