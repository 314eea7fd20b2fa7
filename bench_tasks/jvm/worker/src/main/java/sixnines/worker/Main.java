package sixnines.worker;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;

/**
 * The sixnines JVM worker: one process, one role, honouring the worker contract (docs/workers.md).
 * <pre>java [flags] -cp worker.jar:libs/* sixnines.worker.Main PLAN_FILE</pre>
 * Events go to stdout as JSON lines; anything else the JVM or a library prints goes to stderr (System.out is
 * pointed there first), so the event stream stays clean. Exit 0 after `done`, 1 after `failed`, 3 when the
 * driving process went away (stdin closed).
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) {
        if (args.length == 1 && args[0].equals("--clock")) { // bench_tasks.jvm.build: is this CLOCK_MONOTONIC?
            System.out.println(System.nanoTime());
            return;
        }
        System.setProperty("chronicle.analytics.disable", "true"); // also on the command line: before any library
        System.setOut(System.err);
        Events events = new Events();
        Plan plan;
        try {
            plan = Plan.read(Path.of(args[0]));
        } catch (Exception e) {
            System.err.println("cannot read the plan: " + e);
            System.exit(2);
            return;
        }
        try {
            run(plan, events);
        } catch (Throwable t) {
            StringWriter trace = new StringWriter();
            t.printStackTrace(new PrintWriter(trace));
            System.err.println(trace);
            events.emit(Events.event("failed", plan).field("error", t.getClass().getSimpleName() + ": " + t.getMessage()));
            System.exit(1);
        }
        System.exit(0);
    }

    private static void run(Plan plan, Events events) throws Exception {
        Control control = Control.listen();
        int hiccupCapacity = (int) Math.min(1 << 20, plan.number("measure_ns") / HiccupMeter.TICK_NS + 1024);
        HiccupMeter hiccups = HiccupMeter.start(hiccupCapacity);
        try (Transport transport = Transports.open(plan)) {
            Role role = role(plan, events, control, transport);
            SelfWatch watch = new SelfWatch(role, events, plan.number("report_every_ms")).start();
            Throwable[] failure = new Throwable[1];
            Thread message = new Thread(() -> {
                try {
                    role.run();
                } catch (Throwable t) {
                    failure[0] = t;
                }
            }, threadName(plan.role()));
            message.start();
            message.join();
            watch.stop();
            if (failure[0] != null) {
                throw new RuntimeException(failure[0].toString(), failure[0]);
            }
            watch.report();
            hiccups.stop();
            long t0 = control.t0Ns();
            String within = t0 == 0 ? "[]" : hiccups.within(plan.measureStartNs(t0), plan.measureEndNs(t0));
            Json summary = new Json().field("dropped", 0).field("client_errors", transport.clientErrors().json())
                .raw("hiccups", within).field("hiccups_truncated", hiccups.full())
                .field("client", transport.describe());
            events.emit(Events.event("harness", plan).field("summary", summary));
            events.emit(Events.event("done", plan));
        }
    }

    private static String threadName(String role) {
        return switch (role) {
            case "producer" -> "msg-produce";
            case "consumer" -> Consumer.THREAD;
            case "relay" -> Relay.THREAD;
            default -> "msg-" + role;
        };
    }

    private static Role role(Plan plan, Events events, Control control, Transport transport) throws Exception {
        return switch (plan.role()) {
            case "producer" -> new Producer(plan, events, control, transport);
            case "consumer" -> new Consumer(plan, events, control, transport);
            case "relay" -> new Relay(plan, events, control, transport);
            default -> throw new IllegalArgumentException("plan: role=" + plan.role() + " is not one this worker plays");
        };
    }
}
