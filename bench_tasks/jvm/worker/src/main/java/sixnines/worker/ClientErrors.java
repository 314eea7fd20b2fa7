package sixnines.worker;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Client errors that belong to no message, counted by kind with the last one's text: the `client_errors` harness
 * fact (docs/workers.md), the shape the Python workers report ({count, kinds, last}). Any thread may add one.
 */
final class ClientErrors {
    static final ClientErrors NONE = new ClientErrors();
    private final Map<String, Long> kinds = new LinkedHashMap<>();
    private long count;
    private String last;

    synchronized void add(Throwable error) {
        String kind = error.getClass().getSimpleName();
        kinds.merge(kind, 1L, Long::sum);
        count++;
        last = kind + ": " + error.getMessage();
    }

    synchronized long count() {
        return count;
    }

    synchronized Json json() {
        return new Json().field("count", count).counts("kinds", Map.copyOf(kinds)).field("last", last);
    }
}
