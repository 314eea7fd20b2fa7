package sixnines.worker;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Map;

/**
 * A measured receiver: reads the route from the end, stamps each message the moment the client hands it over
 * (received_ns), decodes its header into the columns and keeps reading until the driving process says `stop`
 * (after its drain). A relayed message (hop >= 1) carries the relay's stamps, kept beside the header's.
 */
final class Consumer extends Role {
    static final String THREAD = "msg-consume";
    static final String[] COLUMNS = {"producer_id", "seq", "intended_ns", "sent_ns", "received_ns", "partition",
        "offset", "hop", "relay_received_ns", "relay_sent_ns"};
    private final Transport transport;
    private final Columns rows;
    private volatile long bad;
    private volatile long workNs;
    private volatile Transport.Receiver receiver;
    private long reported;
    private final Fresh fromIntended = new Fresh(Role.REPORT_VALUES);
    private final Fresh fromSent = new Fresh(Role.REPORT_VALUES);
    private final Fresh at = new Fresh(Role.REPORT_VALUES);

    Consumer(Plan plan, Events events, Control control, Transport transport) {
        super(plan, events, control);
        this.transport = transport;
        this.rows = new Columns(COLUMNS.length, plan.number("expected_messages"));
    }

    @Override
    void run() throws Exception {
        int capacity = Math.max(Message.RELAYED_MIN_SIZE, (int) plan.number("message_size_bytes"));
        ByteBuffer buf = ByteBuffer.wrap(new byte[capacity]).order(ByteOrder.LITTLE_ENDIAN);
        try (Transport.Receiver in = transport.receiver(plan.text("route"), "sixnines-c" + plan.index())) {
            receiver = in;
            ready(0);
            long work = 0;
            long badCount = 0;
            while (!control.stopped()) {
                int length = in.poll(buf);
                if (length < 0) {
                    in.idle();
                    continue;
                }
                long arrived = in.arrivedNs();
                long received = arrived >= 0 ? arrived : System.nanoTime();
                in.busy();
                if (!Message.ours(buf, length)) {
                    bad = ++badCount;
                    continue;
                }
                record(buf, length, received, in.offset(), in.partition());
                work += System.nanoTime() - received;
                workNs = work;
            }
        }
        RawFile.write(plan.scratch().resolve("received-c" + plan.index() + ".s9raw"), "received", COLUMNS, rows);
    }

    private void record(ByteBuffer buf, int length, long received, long offset, int partition) {
        int hop = buf.get(Message.HOP_OFFSET) & 0xff;
        rows.next();
        rows.set(0, buf.getInt(Message.PRODUCER_OFFSET) & 0xffffffffL);
        rows.set(1, buf.getLong(Message.SEQ_OFFSET));
        rows.set(2, buf.getLong(Message.INTENDED_OFFSET));
        rows.set(3, buf.getLong(Message.SENT_OFFSET));
        rows.set(4, received);
        rows.set(5, partition);
        rows.set(6, offset);
        rows.set(7, hop > 0 ? hop + 1 : 0); // the chain's final hop (2), or 0 outside a chain
        if (hop > 0 && length >= Message.RELAYED_MIN_SIZE) {
            rows.set(8, buf.getLong(Message.RELAY_RECEIVED_OFFSET));
            rows.set(9, buf.getLong(Message.RELAY_SENT_OFFSET));
        } else {
            rows.set(8, -1);
            rows.set(9, -1);
        }
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
    synchronized void progress() {
        long end = rows.rows();
        long start = reported;
        reported = end;
        fromIntended.reset();
        fromSent.reset();
        at.reset();
        long step = Fresh.step(end - start);
        long worst = -1;
        for (long r = start; r < end; r++) {
            long e2e = rows.get(4, r) - rows.get(2, r);
            if (worst < 0 || e2e > rows.get(4, worst) - rows.get(2, worst)) {
                worst = r;
            }
            if ((r - start) % step == 0) {
                add(r);
            }
        }
        if (worst >= 0) {
            add(worst);
        }
        events.emit(Events.event("progress", plan).field("received", end).field("bad", bad)
            .field("e2e_intended_ns", fromIntended.values, fromIntended.count)
            .field("e2e_sent_ns", fromSent.values, fromSent.count).field("e2e_at_ns", at.values, at.count));
    }

    private void add(long r) {
        fromIntended.add(rows.get(4, r) - rows.get(2, r));
        fromSent.add(rows.get(4, r) - rows.get(3, r));
        at.add(rows.get(2, r));
    }
}
