"""The engine's plumbing: the interval record written to storage and its buffered sink, Kafka
producers/consumers and the driver's checkpoint snapshots."""
