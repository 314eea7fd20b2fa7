package sixnines.worker;

import java.util.concurrent.CopyOnWriteArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Per-message int64 columns in fixed-size blocks: appending never copies what is there (a doubling array would
 * stall the message thread for a copy of everything it holds), and the blocks for the rows the schedule promises
 * are allocated and touched before the schedule starts. One thread writes; a reader reads `rows()` first and only
 * rows below it (the count is published after the row's values).
 */
final class Columns {
    static final int BLOCK = 1 << 16;
    private final int width;
    private final List<long[][]> blocks = new CopyOnWriteArrayList<>();
    private volatile long rows;
    private long[][] current;
    private int at = BLOCK;

    Columns(int width, long expected) {
        this.width = width;
        long n = Math.max(1, (expected + BLOCK - 1) / BLOCK);
        for (long b = 0; b < n; b++) {
            blocks.add(block());
        }
    }

    private long[][] block() {
        long[][] block = new long[width][BLOCK];
        for (long[] column : block) {
            Arrays.fill(column, -1L);
        }
        return block;
    }

    /** The row being written (call `set` for its columns, then `commit`). */
    void next() {
        if (at == BLOCK) {
            int b = (int) (rows / BLOCK);
            if (b == blocks.size()) {
                blocks.add(block());
            }
            current = blocks.get(b);
            at = 0;
        }
    }

    void set(int column, long value) {
        current[column][at] = value;
    }

    void commit() {
        at++;
        rows = rows + 1;
    }

    long rows() {
        return rows;
    }

    long get(int column, long row) {
        return blocks.get((int) (row / BLOCK))[column][(int) (row % BLOCK)];
    }
}
