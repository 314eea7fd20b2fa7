package sixnines.worker;

import java.io.IOException;
import java.io.StringReader;
import java.util.Properties;

/**
 * Settings a transport may not read from the plan file: a login, a JAAS line, TLS material. The driving process
 * passes them in one environment variable as a properties text (`WorkerProgram.secret_env`), so they are never on
 * disk beside the plan; a transport never describes them.
 */
final class SecretEnv {
    private SecretEnv() {
    }

    /** The properties text in environment variable `name`; empty when it is not set. */
    static Properties read(String name) {
        Properties secret = new Properties();
        String text = System.getenv(name);
        if (text != null) {
            try {
                secret.load(new StringReader(text));
            } catch (IOException e) {
                throw new IllegalArgumentException(name + " is not a properties text");
            }
        }
        return secret;
    }
}
