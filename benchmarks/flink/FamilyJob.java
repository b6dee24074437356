// One configuration of barriersim's family of Flink jobs (docs/fidelity-family.md), for Flink 2.3.0, from its JSON
// description (benchmarks/flink_family/description.py writes it; the same description becomes barriersim's scenario).
//
// A NumberSequenceSource chained to a pacing map (record n of a subtask due at t0 + n / rate, the schedule restarted
// when more than 1 s behind, as the facts' job paces) emits (key, random int, payload); each later vertex takes its
// input through its exchange (hash: keyBy to a keyed counter; rebalance, forward, broadcast: a map), starts a chain
// of its own, spins the CPU for its cost per record (the thread's CPU time, so subtasks sharing the cores slow each
// other) and sleeps the hot key's extra cost at the hot vertex; the last vertex is chained to a DiscardingSink.
// The MiniCluster's settings (TaskManagers, slots, buffers, debloating, checkpointing) come from the description.
// Run by benchmarks/flink_family/runner.py: `java ... FamilyJob <description.json> <rest port>`; it prints
// "JOB <id>" once submitted and cancels the job and exits when its standard input says "stop" or closes.
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

public class FamilyJob {
  /** (key, random int, payload): the facts' record types. */
  public static class Rec extends Tuple3<Integer, Integer, String> {
    public Rec() {}
    public Rec(int key, int r, String payload) { super(key, r, payload); }
  }

  /** The cost of a record: a CPU spin of spinNanos of the thread's CPU time, and a sleep for the hot key. */
  static final class Cost implements java.io.Serializable {
    final long spinNanos; final long hotNanos; final int hotKey;
    transient ThreadMXBean bean;
    Cost(double spinUs, double hotUs, int hotKey) {
      this.spinNanos = (long) (spinUs * 1000); this.hotNanos = (long) (hotUs * 1000); this.hotKey = hotKey;
    }
    void pay(int key) {
      if (spinNanos > 0) {
        if (bean == null) bean = ManagementFactory.getThreadMXBean();
        long end = bean.getCurrentThreadCpuTime() + spinNanos;
        while (bean.getCurrentThreadCpuTime() < end) { }
      }
      if (hotNanos > 0 && key == hotKey) LockSupport.parkNanos(hotNanos);
    }
  }

  /** The pacing map chained to the source: the facts' schedule, keys drawn from the description's distribution. */
  public static class Pace extends RichMapFunction<Long, Rec> {
    final double ratePerSubtask; final double[] cdf; final int payloadBytes; final long seed;
    transient long t0; transient long n; transient Random rnd; transient String payload;
    Pace(double ratePerSubtask, double[] cdf, int payloadBytes, long seed) {
      this.ratePerSubtask = ratePerSubtask; this.cdf = cdf; this.payloadBytes = payloadBytes; this.seed = seed;
    }
    @Override public void open(OpenContext c) {
      rnd = new Random(seed * 1000 + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask());
      payload = "x".repeat(payloadBytes); t0 = System.nanoTime(); n = 0;
    }
    @Override public Rec map(Long v) {
      n++;
      long ahead = t0 + (long) (n * 1e9 / ratePerSubtask) - System.nanoTime();
      if (ahead > 0) LockSupport.parkNanos(ahead);
      else if (ahead < -1_000_000_000L) { t0 = System.nanoTime(); n = 0; }
      int key = Arrays.binarySearch(cdf, rnd.nextDouble());
      key = key >= 0 ? key + 1 : -key - 1;
      return new Rec(Math.min(key, cdf.length - 1), rnd.nextInt(1_000_000), payload);
    }
  }

  /** A vertex after a rebalance, forward or broadcast exchange: pays the cost and passes the record on. */
  public static class Work extends RichMapFunction<Rec, Rec> {
    final Cost cost;
    Work(Cost cost) { this.cost = cost; }
    @Override public Rec map(Rec r) { cost.pay(r.f0); return r; }
  }

  /** A vertex after a hash exchange: a ValueState counter per key, the cost, the record passed on. */
  public static class KeyedWork extends KeyedProcessFunction<Integer, Rec, Rec> {
    final Cost cost; transient ValueState<Long> count;
    KeyedWork(Cost cost) { this.cost = cost; }
    @Override public void open(OpenContext c) {
      count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Long.class));
    }
    @Override public void processElement(Rec r, Context ctx, Collector<Rec> out) throws Exception {
      Long c = count.value();
      count.update(c == null ? 1L : c + 1);
      cost.pay(r.f0);
      out.collect(r);
    }
  }

  /** The keys' cumulative distribution, as barriersim's workload draws them (scenarios/workload.py zipf_cdf). */
  static double[] keyCdf(int keys, double exponent, double hotShare) {
    double[] w = new double[keys];
    for (int i = 0; i < keys; i++) w[i] = 1.0 / Math.pow(i + 1, exponent);
    if (hotShare > 0 && keys > 1) {
      double rest = 0;
      for (int i = 1; i < keys; i++) rest += w[i];
      for (int i = 1; i < keys; i++) w[i] = (1 - hotShare) * w[i] / rest;
      w[0] = hotShare;
    }
    double[] cdf = new double[keys];
    double sum = 0;
    for (int i = 0; i < keys; i++) { sum += w[i]; cdf[i] = sum; }
    for (int i = 0; i < keys; i++) cdf[i] /= sum;
    return cdf;
  }

  static Configuration configuration(JsonNode d, int restPort, String checkpointDir) {
    Configuration conf = new Configuration();
    conf.setString("rest.port", Integer.toString(restPort));
    conf.setString("web.checkpoints.history", "1000");
    // one fetch per snapshot (runner.py); the warm-up probe (warmup.py) asks for a shorter interval
    String fetchMs = d.has("metrics_fetch_ms") ? d.get("metrics_fetch_ms").asText() : "5000";
    conf.setString("metrics.fetcher.update-interval", fetchMs);
    conf.setString("minicluster.number-of-taskmanagers", d.get("taskmanagers").asText());
    conf.setString("taskmanager.numberOfTaskSlots", d.get("slots_per_taskmanager").asText());
    conf.setString("taskmanager.memory.segment-size", d.get("buffer_kib").asText() + "kb");
    if (d.get("debloat").asBoolean()) {
      conf.setString("taskmanager.network.memory.buffer-debloat.enabled", "true");
      conf.setString("taskmanager.network.memory.buffer-debloat.target", d.get("debloat_target_ms").asText() + " ms");
    }
    conf.setString("execution.checkpointing.interval", d.get("interval_ms").asText() + " ms");
    String mode = d.get("mode").asText();
    conf.setString("execution.checkpointing.mode", mode.equals("at-least-once") ? "AT_LEAST_ONCE" : "EXACTLY_ONCE");
    if (mode.equals("unaligned") || mode.equals("aligned-with-timeout"))
      conf.setString("execution.checkpointing.unaligned.enabled", "true");
    if (mode.equals("aligned-with-timeout"))
      conf.setString("execution.checkpointing.aligned-checkpoint-timeout", d.get("aligned_timeout_ms").asText() + " ms");
    conf.setString("execution.checkpointing.storage", "filesystem");
    conf.setString("execution.checkpointing.dir", "file://" + checkpointDir);
    conf.setString("restart-strategy.type", "fixed-delay");
    conf.setString("restart-strategy.fixed-delay.attempts", "3");
    conf.setString("restart-strategy.fixed-delay.delay", "1 s");
    return conf;
  }

  static void build(StreamExecutionEnvironment env, JsonNode d) {
    JsonNode vertices = d.get("vertices");
    JsonNode source = vertices.get(0);
    int sourceParallelism = source.get("parallelism").asInt();
    double[] cdf = keyCdf(d.get("keys").asInt(), d.get("zipf_exponent").asDouble(), d.get("hot_key_share").asDouble());
    DataStream<Rec> stream = env
        .fromSource(new NumberSequenceSource(0, Long.MAX_VALUE), WatermarkStrategy.noWatermarks(), source.get("name").asText())
        .setParallelism(sourceParallelism)
        .map(new Pace(d.get("rate").asDouble() / sourceParallelism, cdf, d.get("payload_bytes").asInt(), d.get("seed").asLong()))
        .setParallelism(sourceParallelism).name(source.get("name").asText() + "-pace");
    String hotVertex = d.get("hot_vertex").asText();
    for (int i = 1; i < vertices.size(); i++) {
      JsonNode v = vertices.get(i);
      String name = v.get("name").asText();
      double hotUs = name.equals(hotVertex) && d.get("hot_key_share").asDouble() > 0 ? d.get("hot_key_extra_us").asDouble() : 0;
      Cost cost = new Cost(v.get("spin_us").asDouble(), hotUs, 0);
      String exchange = v.get("input").asText();
      SingleOutputStreamOperator<Rec> next;
      switch (exchange) {
        case "hash": next = stream.keyBy(r -> r.f0).process(new KeyedWork(cost)); break;
        case "rebalance": next = stream.rebalance().map(new Work(cost)); break;
        case "forward": next = stream.forward().map(new Work(cost)); break;
        case "broadcast": next = stream.broadcast().map(new Work(cost)); break;
        default: throw new IllegalArgumentException("unknown exchange " + exchange);
      }
      next = next.setParallelism(v.get("parallelism").asInt()).name(name).startNewChain();
      stream = next;
      if (i == vertices.size() - 1) stream.sinkTo(new DiscardingSink<>()).setParallelism(v.get("parallelism").asInt()).name(name + "-discard");
    }
  }

  public static void main(String[] args) throws Exception {
    JsonNode d = new ObjectMapper().readTree(new File(args[0]));
    int restPort = Integer.parseInt(args[1]);
    File checkpointDir = Files.createTempDirectory("flink-family-cp-").toFile();
    int exit = 0;
    try {
      StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(configuration(d, restPort, checkpointDir.getPath()));
      build(env, d);
      JobClient client = env.executeAsync(d.get("name").asText());
      System.out.println("JOB " + client.getJobID());
      System.out.flush();
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
      String line;
      while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
      client.cancel().get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      e.printStackTrace();
      exit = 1;
    } finally {
      try (var files = Files.walk(checkpointDir.toPath())) {
        files.sorted(Comparator.reverseOrder()).map(java.nio.file.Path::toFile).forEach(File::delete);
      }
    }
    System.out.flush();
    System.exit(exit);
  }
}
