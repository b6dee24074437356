// The facts' alignment-latency job in Java (docs/flink-facts.md), for Flink 2.3.0: the same shape as
// alignment_job.py (a NumberSequenceSource at p=2 chained to a token-bucket map emitting (key, seq, 100-byte
// payload), 64 keys with 30 % on key 0, keyBy to a keyed function at p=4 with a ValueState counter that sleeps
// 1 ms for key 0, rebalance to DiscardingSink at p=2, one TaskManager, checkpoints every second), without Python:
// the keyed function emits its input record (117 bytes serialized) rather than (key, count). It tells what is
// Flink's network stack and what is PyFlink: docs/flink-facts.md uses it to show that the 16 bytes the keyed
// subtasks persist in heavy unaligned checkpoints are not a record.
//
// Run (with .venv-flink from `make flink-venv`; FLINK_LIB=.venv-flink/lib/python3.11/site-packages/pyflink/lib):
//   javac -cp "$FLINK_LIB/*" -d /tmp/alignment-job benchmarks/flink/AlignmentJob.java
//   java --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED \
//        -cp "$FLINK_LIB/*:/tmp/alignment-job" AlignmentJob unaligned 4000 35
// Arguments: mode (aligned, unaligned, alo, timeout), offered records/s of all sources, seconds to run,
// optionally execution.buffer-timeout.interval. It prints Flink's REST answers: JOB (the job), CPS (the checkpoint
// history) and SUB (each completed checkpoint's per-subtask statistics, one line per vertex), REST on port 8081.
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;
import org.apache.flink.core.execution.JobClient;
import java.net.http.*;
import java.net.URI;
import java.util.Random;

public class AlignmentJob {
  public static class Pace extends RichMapFunction<Long, Tuple3<Integer, Long, String>> {
    final double rate; transient long start; transient long n; transient Random rnd; static final String P = "x".repeat(100);
    Pace(double rate) { this.rate = rate; }
    @Override public void open(OpenContext c) { start = System.nanoTime(); n = 0; rnd = new Random(getRuntimeContext().getTaskInfo().getIndexOfThisSubtask()); }
    public Tuple3<Integer, Long, String> map(Long v) throws Exception {
      n++;
      long due = start + (long) (n * 1e9 / rate);
      long now = System.nanoTime();
      if (due > now) Thread.sleep((due - now) / 1000000, (int) ((due - now) % 1000000));
      int key = rnd.nextDouble() < 0.3 ? 0 : 1 + rnd.nextInt(63);
      return Tuple3.of(key, v, P);
    }
  }
  public static class Count extends KeyedProcessFunction<Integer, Tuple3<Integer, Long, String>, Tuple3<Integer, Long, String>> {
    transient ValueState<Long> c;
    @Override public void open(OpenContext ctx) { c = getRuntimeContext().getState(new ValueStateDescriptor<>("c", Long.class)); }
    public void processElement(Tuple3<Integer, Long, String> r, Context ctx, Collector<Tuple3<Integer, Long, String>> out) throws Exception {
      if (r.f0 == 0) Thread.sleep(1);
      Long v = c.value(); c.update(v == null ? 1 : v + 1);
      out.collect(r);
    }
  }
  public static void main(String[] a) throws Exception {
    String mode = a[0]; double total = Double.parseDouble(a[1]); int secs = Integer.parseInt(a[2]);
    Configuration conf = new Configuration();
    conf.setString("execution.checkpointing.interval", "1000ms");
    conf.setString("rest.port", "8081");
    if (mode.equals("unaligned")) conf.setString("execution.checkpointing.unaligned.enabled", "true");
    if (mode.equals("alo")) conf.setString("execution.checkpointing.mode", "AT_LEAST_ONCE");
    if (mode.equals("timeout")) { conf.setString("execution.checkpointing.unaligned.enabled", "true"); conf.setString("execution.checkpointing.aligned-checkpoint-timeout", "500ms"); }
    if (a.length > 3) conf.setString("execution.buffer-timeout.interval", a[3]);
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.fromSource(new NumberSequenceSource(0, Long.MAX_VALUE), WatermarkStrategy.noWatermarks(), "src").setParallelism(2)
      .map(new Pace(total / 2)).setParallelism(2)
      .keyBy(t -> t.f0).process(new Count()).setParallelism(4)
      .rebalance().sinkTo(new DiscardingSink<>()).setParallelism(2);
    JobClient jc = env.executeAsync("alignment-latency-java");
    String id = jc.getJobID().toString();
    Thread.sleep(secs * 1000L);
    HttpClient h = HttpClient.newHttpClient();
    String base = "http://localhost:8081/jobs/" + id;
    System.out.println("JOB " + h.send(HttpRequest.newBuilder(URI.create(base)).build(), HttpResponse.BodyHandlers.ofString()).body());
    String cps = h.send(HttpRequest.newBuilder(URI.create(base + "/checkpoints")).build(), HttpResponse.BodyHandlers.ofString()).body();
    System.out.println("CPS " + cps);
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"id\":(\\d+),\"status\":\"COMPLETED\"").matcher(cps);
    java.util.List<String> vids = new java.util.ArrayList<>();
    java.util.regex.Matcher vm = java.util.regex.Pattern.compile("\"id\":\"([0-9a-f]{32})\"").matcher(h.send(HttpRequest.newBuilder(URI.create(base)).build(), HttpResponse.BodyHandlers.ofString()).body());
    while (vm.find()) vids.add(vm.group(1));
    while (m.find()) {
      String cid = m.group(1);
      for (String v : vids) System.out.println("SUB " + cid + " " + v + " " + h.send(HttpRequest.newBuilder(URI.create(base + "/checkpoints/details/" + cid + "/subtasks/" + v)).build(), HttpResponse.BodyHandlers.ofString()).body());
    }
    System.out.flush();
    System.exit(0);
  }
}
