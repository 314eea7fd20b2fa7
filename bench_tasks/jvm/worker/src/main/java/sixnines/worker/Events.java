package sixnines.worker;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The worker's reports to the driving process: one JSON object per line on stdout (docs/workers.md, "Events").
 * Lines are built with {@link Json} and written whole under one lock, so threads never interleave them; each is
 * flushed at once (the parent waits on `ready` and `done`).
 */
final class Events {
    private final OutputStream out = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16);

    synchronized void emit(Json event) {
        try {
            out.write(event.end().getBytes(StandardCharsets.UTF_8));
            out.write('\n');
            out.flush();
        } catch (IOException e) {
            // The parent is gone: nothing can report anything any more; Control ends the process on stdin's EOF.
        }
    }

    static Json event(String kind, Plan plan) {
        return new Json().field("kind", kind).field("role", plan.role()).field("index", plan.index());
    }
}
