package sixnines.worker;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.Delivery;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A consumer of one queue, pushed deliveries on the client's consumer thread. That thread stamps each delivery the
 * moment the client hands it over (PerfTest's moment), acknowledges it at once where the cell asks for manual
 * acknowledgements (the Python driver's way), and queues it; the role's thread takes them in order, waiting up to
 * 50 ms when none is there. Ready once the broker confirmed the subscription (`basic.consume-ok`): every message
 * routed to the queue from then on is delivered here or to another consumer of the route. Backlog: deliveries
 * stamped and not yet taken by the role's thread.
 */
final class RabbitmqReceiver implements Transport.Receiver {
    private static final long WAIT_MS = 50;
    private final Connection connection;
    private final LinkedBlockingQueue<Arrival> arrivals = new LinkedBlockingQueue<>();
    private final int partition;
    private long arrived = -1;

    private record Arrival(long atNs, byte[] body) {
    }

    private RabbitmqReceiver(Connection connection, int partition) {
        this.connection = connection;
        this.partition = partition;
    }

    static RabbitmqReceiver subscribe(RabbitmqTransport transport, String queue, String name, Plan plan)
        throws Exception {
        Connection connection = transport.connect(name);
        RabbitmqReceiver receiver = new RabbitmqReceiver(connection, transport.partition());
        try {
            Channel channel = connection.createChannel();
            boolean manual = plan.text("rabbitmq.acks").equals("manual");
            long prefetch = plan.number("rabbitmq.prefetch");
            if (manual && prefetch > 0) {
                channel.basicQos((int) prefetch);
            }
            channel.basicConsume(queue, !manual, name, (tag, delivery) -> receiver.take(channel, delivery, manual),
                tag -> transport.errors().add(new IOException("the broker cancelled consumer " + tag)));
        } catch (IOException | RuntimeException e) {
            connection.abort();
            throw e;
        }
        return receiver;
    }

    private void take(Channel channel, Delivery delivery, boolean manual) throws IOException {
        long at = System.nanoTime();
        arrivals.add(new Arrival(at, delivery.getBody()));
        if (manual) {
            channel.basicAck(delivery.getEnvelope().getDeliveryTag(), false);
        }
    }

    @Override
    public int poll(ByteBuffer into) {
        Arrival next;
        try {
            next = arrivals.poll(WAIT_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
        if (next == null) {
            return -1;
        }
        arrived = next.atNs();
        byte[] body = next.body();
        into.put(0, body, 0, Math.min(body.length, into.capacity()));
        return body.length;
    }

    @Override
    public long arrivedNs() {
        return arrived;
    }

    @Override
    public long offset() {
        return -1;
    }

    @Override
    public int partition() {
        return partition;
    }

    @Override
    public long backlog() {
        return arrivals.size();
    }


    @Override
    public void close() {
        try {
            connection.close(5_000);
        } catch (IOException e) {
            // already closed by the broker: its cause was counted
        }
    }
}
