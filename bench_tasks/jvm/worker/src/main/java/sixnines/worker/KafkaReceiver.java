package sixnines.worker;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A Kafka consumer in the route's group, used by one thread only (the role's message thread): `poll` hands over one
 * record at a time from the batch the client's last poll returned, and polls again (waiting up to 50 ms) when that
 * batch is used up. It is ready once the group gave it its partitions (possibly none: more consumers than
 * partitions), each positioned at once, at the end or the beginning as `client.start_from` says, so nothing sent
 * after `ready` is skipped. A partition taken away in a rebalance is committed first, so its next owner resumes
 * where this one stopped. Backlog: records the client handed over that this worker has not stamped yet.
 */
final class KafkaReceiver implements Transport.Receiver, ConsumerRebalanceListener {
    private static final Duration POLL = Duration.ofMillis(50);
    private static final long ASSIGN_TIMEOUT_NS = 60_000_000_000L;
    private static final long AFTER_ERROR_NS = 10_000_000L;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final ClientErrors errors;
    private Iterator<ConsumerRecord<byte[], byte[]>> batch = List.<ConsumerRecord<byte[], byte[]>>of().iterator();
    private volatile int waiting;
    private volatile boolean assigned;
    private long offset = -1;
    private int partition = -1;

    private KafkaReceiver(KafkaConsumer<byte[], byte[]> consumer, ClientErrors errors) {
        this.consumer = consumer;
        this.errors = errors;
    }

    static KafkaReceiver subscribe(KafkaTransport transport, String topic, String name) {
        Properties props = transport.settings(name, "kafka.consumer.");
        props.putIfAbsent("group.id", topic);
        props.putIfAbsent("enable.auto.commit", "false");
        props.putIfAbsent("auto.offset.reset", transport.startFrom().equals("end") ? "latest" : "earliest");
        KafkaConsumer<byte[], byte[]> consumer =
            new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        KafkaReceiver receiver = new KafkaReceiver(consumer, transport.errors());
        consumer.subscribe(List.of(topic), receiver);
        receiver.awaitAssignment(topic, name);
        return receiver;
    }

    private void awaitAssignment(String topic, String name) {
        long deadline = System.nanoTime() + ASSIGN_TIMEOUT_NS;
        while (!assigned) {
            if (System.nanoTime() > deadline) {
                consumer.close(Duration.ZERO);
                throw new IllegalStateException(name + ": no partition of " + topic + " assigned within 60 s");
            }
            keep(consumer.poll(POLL)); // drives the group protocol; nothing is sent before ready, but keep anything
        }
    }

    private void keep(ConsumerRecords<byte[], byte[]> records) {
        batch = records.iterator();
        waiting = records.count();
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            consumer.position(tp); // resolved now (committed, else end or beginning), not at the first fetch
        }
        assigned = true;
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
        try {
            for (TopicPartition tp : partitions) {
                positions.put(tp, new OffsetAndMetadata(consumer.position(tp)));
            }
            consumer.commitSync(positions);
        } catch (KafkaException e) {
            errors.add(e);
        }
    }

    @Override
    public int poll(ByteBuffer into) {
        if (!batch.hasNext()) {
            try {
                keep(consumer.poll(POLL));
            } catch (KafkaException e) {
                errors.add(e);
                LockSupport.parkNanos(AFTER_ERROR_NS);
                return -1;
            }
            if (!batch.hasNext()) {
                return -1;
            }
        }
        ConsumerRecord<byte[], byte[]> record = batch.next();
        waiting = waiting - 1;
        byte[] value = record.value();
        int length = value == null ? 0 : value.length;
        if (length > 0) {
            into.put(0, value, 0, Math.min(length, into.capacity()));
        }
        offset = record.offset();
        partition = record.partition();
        return length;
    }

    @Override
    public long offset() {
        return offset;
    }

    @Override
    public int partition() {
        return partition;
    }

    @Override
    public long backlog() {
        return waiting;
    }


    @Override
    public void close() {
        consumer.close(Duration.ofSeconds(5));
    }
}
