package sixnines.worker;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.Delivery;
import java.io.IOException;

/**
 * A consumer of one queue, pushed deliveries on the client's consumer thread. That thread stamps and queues each
 * delivery the moment the client hands it over, PerfTest's moment ({@link PushedArrivals}), and acknowledges it at
 * once where the cell asks for manual acknowledgements (the Python driver's way). Ready once the broker confirmed
 * the subscription (`basic.consume-ok`): every message routed to the queue from then on is delivered here or to
 * another consumer of the route.
 */
final class RabbitmqReceiver extends PushedArrivals {
    private final Connection connection;
    private final int partition;

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
        arrived(delivery.getBody());
        if (manual) {
            channel.basicAck(delivery.getEnvelope().getDeliveryTag(), false);
        }
    }

    @Override
    public int partition() {
        return partition;
    }



    @Override
    public void close() {
        try {
            connection.close(5_000);
        } catch (IOException | RuntimeException e) {
            // already closed by the broker (AlreadyClosedException): its cause was counted
        }
    }
}
