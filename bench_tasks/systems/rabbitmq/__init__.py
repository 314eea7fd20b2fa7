"""RabbitMQ as a sixnines system: Debian's rabbitmq-server, 1 node or a 3-node cluster, classic, quorum and
stream queues over AMQP 0-9-1.

Laid out as the system shape of issue 16 (settings, release, nodes; driver and external access follow once the
core's system registry and batch driver API land), and moved under `bench_tasks/systems/` by that redesign:
- `settings.py`: `RabbitmqBroker` and `RabbitmqClient`, and `check_pair` for what only both together show;
- `release.py`: `VERSIONS` and the verified `rabbitmq-server` of a version;
- `nodes.py`: `RabbitCluster`, the nodes of one cell with their private epmd and the broker-control protocol;
- `nodefiles.py`, `erl.py`: a node's folder, config and environment; questions to a node over `erl_call`.
"""
