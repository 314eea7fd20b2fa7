package sixnines.worker;

import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;

/**
 * A pub/sub subscriber of one channel: Lettuce hands each `message` push to its listener on the client's event
 * loop, which stamps and queues it ({@link PushedArrivals}). Ready once the server confirmed the subscription: from
 * then on nothing published to the channel is missed.
 */
final class RedisSubscriber extends PushedArrivals {
    private final StatefulRedisPubSubConnection<byte[], byte[]> connection;

    private RedisSubscriber(StatefulRedisPubSubConnection<byte[], byte[]> connection) {
        this.connection = connection;
    }

    static RedisSubscriber subscribe(RedisTransport transport, byte[] channel) {
        StatefulRedisPubSubConnection<byte[], byte[]> connection =
            transport.client().connectPubSub(ByteArrayCodec.INSTANCE);
        RedisSubscriber subscriber = new RedisSubscriber(connection);
        connection.addListener(new RedisPubSubAdapter<>() {
            @Override
            public void message(byte[] from, byte[] message) {
                subscriber.arrived(message);
            }
        });
        connection.sync().subscribe(channel); // returns once the server confirmed it
        return subscriber;
    }

    @Override
    public void close() {
        connection.close();
    }
}
