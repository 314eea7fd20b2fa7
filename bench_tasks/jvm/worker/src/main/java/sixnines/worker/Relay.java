package sixnines.worker;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The service of a two-hop chain (seed 002): read a message from the measured route, decode its header
 * (deserialise), call the service (here: nothing but the copy), write it to the second route with the producer's
 * header untouched (serialise), so the final consumer still measures from the original intended time. The relay's
 * receive time and its send time, stamped right before the append, travel in the message after the header; its own
 * receipts are its sample file (hop 1), so a loss is placed on the hop where it happened.
 */
final class Relay extends Role implements Transport.Acks {
    static final String THREAD = "msg-relay";
    static final String HOP2 = "hop2";
    private final Transport transport;
    private final Columns rows;
    private volatile long bad;
    private final AtomicLong errors = new AtomicLong();
    private volatile long workNs;
    private volatile Transport.Receiver receiver;

    Relay(Plan plan, Events events, Control control, Transport transport) {
        super(plan, events, control);
        this.transport = transport;
        this.rows = new Columns(Consumer.COLUMNS.length, plan.number("expected_messages"));
    }

    @Override
    void run() throws Exception {
        int size = Math.max(Message.RELAYED_MIN_SIZE, (int) plan.number("message_size_bytes"));
        ByteBuffer buf = ByteBuffer.wrap(new byte[size]).order(ByteOrder.LITTLE_ENDIAN);
        try (Transport.Receiver in = transport.receiver(plan.text("route"), "sixnines-r" + plan.index());
             Transport.Sender out = transport.sender(HOP2, "sixnines-relay" + plan.index())) {
            receiver = in;
            ready(0);
            long work = 0;
            while (!control.stopped()) {
                int length = in.poll(buf);
                if (length < 0) {
                    in.idle();
                    continue;
                }
                long arrived = in.arrivedNs();
                long received = arrived >= 0 ? arrived : System.nanoTime();
                in.busy();
                if (!Message.ours(buf, length) || length < Message.RELAYED_MIN_SIZE) {
                    bad = bad + 1;
                    continue;
                }
                long offset = in.offset();
                buf.put(Message.HOP_OFFSET, (byte) Math.min(255, (buf.get(Message.HOP_OFFSET) & 0xff) + 1));
                buf.putLong(Message.RELAY_RECEIVED_OFFSET, received);
                long sent = System.nanoTime();
                buf.putLong(Message.RELAY_SENT_OFFSET, sent);
                try {
                    out.send(buf, length, 0, this);
                } catch (Exception e) {
                    errors.incrementAndGet();
                    sent = -1;
                }
                record(buf, received, sent, offset, in.partition());
                work += System.nanoTime() - received;
                workNs = work;
            }
        }
        RawFile.write(plan.scratch().resolve("relayed-r" + plan.index() + ".s9raw"), "received", Consumer.COLUMNS, rows);
    }

    /** The second hop's acknowledgement (an asynchronous sender's): only a refusal matters to the relay. */
    @Override
    public void acked(int seq, int partition, long offset, Exception error) {
        if (error != null) {
            errors.incrementAndGet();
        }
    }

    private void record(ByteBuffer buf, long received, long sent, long offset, int partition) {
        rows.next();
        rows.set(0, buf.getInt(Message.PRODUCER_OFFSET) & 0xffffffffL);
        rows.set(1, buf.getLong(Message.SEQ_OFFSET));
        rows.set(2, buf.getLong(Message.INTENDED_OFFSET));
        rows.set(3, buf.getLong(Message.SENT_OFFSET));
        rows.set(4, received);
        rows.set(5, partition);
        rows.set(6, offset);
        rows.set(7, 1); // the relay's receipt: hop 1
        rows.set(8, received);
        rows.set(9, sent);
        rows.commit();
    }

    @Override
    long handled() {
        return rows.rows();
    }

    @Override
    long backlog() {
        Transport.Receiver in = receiver;
        return in == null ? -1 : in.backlog();
    }

    @Override
    String[] messageThreads() {
        return Role.with(THREAD, transport.clientThreads());
    }

    @Override
    Map<String, Long> work() {
        Transport.Receiver in = receiver;
        return in != null && in.spins() ? Map.of(THREAD, workNs) : Map.of();
    }

    @Override
    void progress() {
        events.emit(Events.event("progress", plan).field("relayed", rows.rows()).field("forward_errors", errors.get())
            .field("bad", bad).field("dropped", 0));
    }
}
