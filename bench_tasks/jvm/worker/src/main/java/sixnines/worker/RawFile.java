package sixnines.worker;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * Raw samples as the contract's sample file (docs/workers.md, "Sample files"): one JSON line naming the kind and
 * the int64 columns, then every row as little-endian int64s (-1: null). The driving process turns it into the
 * lake's Parquet file without changing a value. Written to a temporary name and renamed: never seen half-written.
 */
final class RawFile {
    private RawFile() {
    }

    /** `columns.get(c)` holds column c's blocks of `Columns.BLOCK` rows; `rows` rows in all. */
    static void write(Path path, String kind, String[] names, Columns columns) throws IOException {
        Path tmp = path.resolveSibling("." + path.getFileName() + ".tmp");
        StringBuilder header = new StringBuilder("{\"format\":\"sixnines-raw\",\"version\":1,\"kind\":\"")
            .append(kind).append("\",\"rows\":").append(columns.rows()).append(",\"columns\":[");
        for (int c = 0; c < names.length; c++) {
            header.append(c == 0 ? "" : ",").append('"').append(names[c]).append('"');
        }
        header.append("]}\n");
        try (FileChannel out = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
            StandardOpenOption.TRUNCATE_EXISTING)) {
            out.write(ByteBuffer.wrap(header.toString().getBytes(StandardCharsets.UTF_8)));
            ByteBuffer buf = ByteBuffer.allocateDirect(names.length * 8 * 4096).order(ByteOrder.LITTLE_ENDIAN);
            long rows = columns.rows();
            for (long r = 0; r < rows; r++) {
                for (int c = 0; c < names.length; c++) {
                    buf.putLong(columns.get(c, r));
                }
                if (!buf.hasRemaining()) {
                    drain(out, buf);
                }
            }
            drain(out, buf);
        }
        Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    /** Error texts beside a sent file, one `seq<TAB>text` line each (there are few: a refused send is rare). */
    static void writeErrors(Path path, List<String> lines) throws IOException {
        Files.write(path, lines, StandardCharsets.UTF_8);
    }

    private static void drain(FileChannel out, ByteBuffer buf) throws IOException {
        buf.flip();
        while (buf.hasRemaining()) {
            out.write(buf);
        }
        buf.clear();
    }
}
