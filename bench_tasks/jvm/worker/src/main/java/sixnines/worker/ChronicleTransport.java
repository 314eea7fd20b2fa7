package sixnines.worker;

import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import net.openhft.chronicle.bytes.Bytes;
import net.openhft.chronicle.queue.ChronicleQueue;
import net.openhft.chronicle.queue.ExcerptAppender;
import net.openhft.chronicle.queue.ExcerptTailer;
import net.openhft.chronicle.queue.RollCycle;
import net.openhft.chronicle.queue.RollCycles;
import net.openhft.chronicle.threads.Pauser;
import net.openhft.chronicle.wire.DocumentContext;

/**
 * Chronicle Queue as a transport: a route is a queue folder under the cell's queue root (`address`), a message is
 * one document of raw bytes. Appends are synchronous (the append returning is the publish acknowledgement); a
 * tailer reads from the end, waiting by the plan's strategy: `busy` spins (Pauser.busy), `pauser` backs off
 * (Pauser.balanced). Both queue handles of a route are opened once and shared by its sender and receiver.
 */
final class ChronicleTransport implements Transport {
    private final Path root;
    private final RollCycle rollCycle;
    private final String wait;
    private final Map<String, ChronicleQueue> queues = new HashMap<>();

    ChronicleTransport(Plan plan) {
        this.root = Path.of(plan.text("address"));
        this.rollCycle = RollCycles.valueOf(plan.text("chronicle.roll_cycle"));
        this.wait = plan.text("chronicle.wait");
        if (!wait.equals("busy") && !wait.equals("pauser")) {
            throw new IllegalArgumentException("plan: chronicle.wait=" + wait + " is neither busy nor pauser");
        }
    }

    private synchronized ChronicleQueue queue(String route) {
        return queues.computeIfAbsent(route, r -> ChronicleQueue.singleBuilder(root.resolve(r.isEmpty() ? "measured" : r))
            .rollCycle(rollCycle).build());
    }

    @Override
    public Sender sender(String route, String name) throws Exception {
        ChronicleQueue queue = queue(route);
        ExcerptAppender appender = appender(queue);
        return new Sender() {
            @Override
            public long send(ByteBuffer message, int length, int seq, Acks acks) {
                try (DocumentContext dc = appender.writingDocument()) {
                    dc.wire().bytes().write(message.array(), 0, length);
                }
                return appender.lastIndexAppended();
            }

            @Override
            public boolean acknowledgedOnReturn() {
                return true;
            }

            @Override
            public void close() {
                appender.close();
            }
        };
    }

    /** 5.22 calls it acquireAppender, later releases createAppender: the worker runs against either. */
    private static ExcerptAppender appender(ChronicleQueue queue) throws Exception {
        for (String name : new String[] {"createAppender", "acquireAppender"}) {
            try {
                Method method = ChronicleQueue.class.getMethod(name);
                return (ExcerptAppender) method.invoke(queue);
            } catch (NoSuchMethodException e) {
                // the other name
            }
        }
        throw new IllegalStateException("this chronicle-queue has neither createAppender nor acquireAppender");
    }

    @Override
    public Receiver receiver(String route, String name) {
        ChronicleQueue queue = queue(route);
        ExcerptTailer tailer = queue.createTailer().toEnd();
        Pauser pauser = wait.equals("busy") ? Pauser.busy() : Pauser.balanced();
        return new Receiver() {
            private volatile long last = tailer.index();

            @Override
            public int poll(ByteBuffer into) {
                try (DocumentContext dc = tailer.readingDocument()) {
                    if (!dc.isPresent()) {
                        return -1;
                    }
                    if (dc.isMetaData()) {
                        return -1;
                    }
                    Bytes<?> bytes = dc.wire().bytes();
                    int length = (int) bytes.readRemaining();
                    bytes.read(into.array(), 0, Math.min(length, into.capacity()));
                    last = dc.index();
                    return length;
                }
            }

            @Override
            public long offset() {
                return last;
            }

            @Override
            public long backlog() {
                try {
                    long end = queue.lastIndex();
                    long read = last;
                    if (end < 0 || read < 0) {
                        return end < 0 ? 0 : -1;
                    }
                    if (rollCycle.toCycle(end) != rollCycle.toCycle(read)) {
                        return -1;
                    }
                    return Math.max(0, rollCycle.toSequenceNumber(end) - rollCycle.toSequenceNumber(read));
                } catch (RuntimeException e) {
                    return -1;
                }
            }

            @Override
            public void idle() {
                pauser.pause();
            }

            @Override
            public void busy() {
                pauser.reset();
            }

            @Override
            public boolean spins() {
                return true; // Pauser.busy spins; Pauser.balanced spins, then yields, and parks only when idle long
            }

            @Override
            public void close() {
                tailer.close();
            }
        };
    }

    @Override
    public Json describe() {
        return new Json().field("library", "chronicle-queue")
            .field("roll_cycle", rollCycle.toString()).field("wait", wait).field("root", root.toString());
    }

    @Override
    public synchronized void close() {
        queues.values().forEach(ChronicleQueue::close);
        queues.clear();
    }
}
