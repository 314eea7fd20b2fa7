package sixnines.worker;

/** The transport a plan names (`transport=`): the one place the worker lists the systems it speaks. */
final class Transports {
    private Transports() {
    }

    static Transport open(Plan plan) {
        return switch (plan.text("transport")) {
            case "chronicle" -> new ChronicleTransport(plan);
            case "kafka" -> new KafkaTransport(plan);
            case "rabbitmq" -> new RabbitmqTransport(plan);
            case "redis" -> new RedisTransport(plan);
            default -> throw new IllegalArgumentException("plan: transport=" + plan.text("transport") + " is unknown");
        };
    }
}
