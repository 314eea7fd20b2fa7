package sixnines.worker;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

/**
 * The 32-byte header every sixnines message carries (bench_tasks/core/header.py, the one definition), then random
 * filler up to the message size, fresh for every message so nothing can compress it:
 * magic "S9" | schema u8 | hop u8 | producer_id u32 | seq u64 | intended_ns u64 | sent_ns u64, little endian;
 * a relayed message (hop >= 1) carries relay_received_ns u64 | relay_sent_ns u64 right after it.
 */
final class Message {
    static final int HEADER_SIZE = 32;
    static final int SCHEMA = 2;
    static final int HOP_OFFSET = 3;
    static final int PRODUCER_OFFSET = 4;
    static final int SEQ_OFFSET = 8;
    static final int INTENDED_OFFSET = 16;
    static final int SENT_OFFSET = 24;
    static final int RELAY_RECEIVED_OFFSET = 32;
    static final int RELAY_SENT_OFFSET = 40;
    static final int RELAYED_MIN_SIZE = 48;

    private Message() {
    }

    static ByteBuffer buffer(int size) {
        if (size < HEADER_SIZE) {
            throw new IllegalArgumentException("message_size_bytes " + size + " is below the 32 B header");
        }
        return ByteBuffer.allocateDirect(size).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Header (sent_ns still 0) and fresh filler: done before waiting for the intended time. */
    static void prepare(ByteBuffer buf, SplittableRandom random, int producer, long seq, long intended) {
        buf.put(0, (byte) 'S').put(1, (byte) '9').put(2, (byte) SCHEMA).put(HOP_OFFSET, (byte) 0);
        buf.putInt(PRODUCER_OFFSET, producer).putLong(SEQ_OFFSET, seq).putLong(INTENDED_OFFSET, intended);
        buf.putLong(SENT_OFFSET, 0L);
        int size = buf.capacity();
        int at = HEADER_SIZE;
        for (; at + 8 <= size; at += 8) {
            buf.putLong(at, random.nextLong());
        }
        for (; at < size; at++) {
            buf.put(at, (byte) random.nextInt());
        }
    }

    /** The only work between reading the clock and handing the message to the client. */
    static void stampSent(ByteBuffer buf, long sentNs) {
        buf.putLong(SENT_OFFSET, sentNs);
    }

    static boolean ours(ByteBuffer buf, int length) {
        return length >= HEADER_SIZE && buf.get(0) == 'S' && buf.get(1) == '9' && buf.get(2) == SCHEMA;
    }
}
