package modelfs;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSNNTopology;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.namenode.NameNode;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * A MiniDFSCluster for modelfs's tests, driven over stdin/stdout; README.md beside pom.xml has
 * the protocol.
 *
 * <p>Usage: {@code java -Xmx512m -jar minihdfs.jar BASE_DIR [--datanodes N] [--block-size BYTES]
 * [--start-timeout SECS] [--log FILE] [--ha] [--kerberos]}. The cluster's directories go under BASE_DIR/dfs (wiped on
 * start). When the cluster is up, one JSON line goes to stdout; then each command line on stdin
 * gets one answer line, {@code ok} or {@code error: ...}. EOF on stdin is {@code quit}, so a test
 * that dies leaves no JVM behind. Everything else goes to the log file (BASE_DIR/minihdfs.log
 * unless --log says otherwise). Paths in commands cannot contain whitespace.
 */
public final class MiniHdfs {
  private static final String LOOPBACK = "127.0.0.1";
  /** The nameservice of {@code --ha}. */
  private static final String NAMESERVICE = "ns1";
  /**
   * The Kerberos principals' host: servers are {@code hdfs/localhost} and {@code HTTP/localhost}
   * (what a client's GSSAPI asks a ticket for when it reaches 127.0.0.1).
   */
  private static final String KRB_HOST = "localhost";
  /** The principal (and short user name) of {@code --kerberos}'s client keytab. */
  private static final String USER = "modelfs";

  private final MiniDFSCluster cluster;
  /** The launcher's own client: the HA-aware one of the nameservice with {@code --ha}. */
  private final DistributedFileSystem fs;
  /** What the ready line says beyond the cluster's ports (conf_dir, nameservice, Kerberos). */
  private final Map<String, String> extra;
  /** DataNode UUIDs by the index tests know them by: MiniDFSCluster's own indexes shift. */
  private final List<String> uuids = new ArrayList<>();

  private final Map<Integer, MiniDFSCluster.DataNodeProperties> stopped = new HashMap<>();
  private final short replication;

  private MiniHdfs(
      MiniDFSCluster cluster, DistributedFileSystem fs, short replication,
      Map<String, String> extra) {
    this.cluster = cluster;
    this.fs = fs;
    this.replication = replication;
    this.extra = extra;
    for (DataNode dn : cluster.getDataNodes()) {
      uuids.add(dn.getDatanodeUuid());
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1 || args[0].startsWith("-")) {
      System.err.println(
          "usage: minihdfs BASE_DIR [--datanodes N] [--block-size BYTES]"
              + " [--start-timeout SECS] [--log FILE] [--ha] [--kerberos]");
      System.exit(2);
    }
    File base = new File(args[0]).getAbsoluteFile();
    int datanodes = 2;
    int startTimeout = 120;
    long blockSize = 1L << 20;
    File log = new File(base, "minihdfs.log");
    boolean ha = false;
    boolean kerberos = false;
    for (int i = 1; i < args.length; i += 2) {
      if (args[i].equals("--ha") || args[i].equals("--kerberos")) {
        ha |= args[i].equals("--ha");
        kerberos |= args[i].equals("--kerberos");
        i--;
        continue;
      }
      if (i + 1 >= args.length) {
        die("missing value for " + args[i]);
      }
      switch (args[i]) {
        case "--datanodes":
          datanodes = Integer.parseInt(args[i + 1]);
          break;
        case "--block-size":
          blockSize = Long.parseLong(args[i + 1]);
          break;
        case "--start-timeout":
          startTimeout = Integer.parseInt(args[i + 1]);
          break;
        case "--log":
          log = new File(args[i + 1]).getAbsoluteFile();
          break;
        default:
          die("unknown option " + args[i]);
      }
    }
    Files.createDirectories(base.toPath());

    // stdout is the protocol channel: keep it, and send everything any library prints (and
    // log4j, configured by log4j.properties from this property) to the log file. This must
    // happen before the first Hadoop class loads.
    PrintStream proto =
        new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    PrintStream origErr = System.err;
    System.setProperty("minihdfs.log", log.getPath());
    PrintStream logStream = new PrintStream(new FileOutputStream(log, true), true);
    System.setOut(logStream);
    System.setErr(logStream);

    // A start that hangs (a DataNode that never registers) must not hang the test waiting for
    // the JSON line: give up after --start-timeout (120 s; a start takes ~7 s).
    Thread watchdog = startWatchdog(startTimeout, origErr, log);
    MiniHdfs hdfs;
    long started = System.nanoTime();
    try {
      hdfs = startRetrying(base, datanodes, blockSize, ha, kerberos, logStream);
    } catch (Throwable e) {
      e.printStackTrace(logStream);
      origErr.println("minihdfs: cluster did not start: " + e + " (log: " + log + ")");
      System.exit(1);
      return;
    }
    watchdog.interrupt();
    logStream.printf("minihdfs: cluster up in %d ms%n", (System.nanoTime() - started) / 1000000);

    AtomicBoolean down = new AtomicBoolean();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> hdfs.shutdown(down)));

    proto.println(
        "{\"namenode\": \"hdfs://" + LOOPBACK + ":" + hdfs.cluster.getNameNodePort(0)
            + "\", \"webhdfs\": \"http://" + LOOPBACK + ":"
            + hdfs.cluster.getNameNode(0).getHttpAddress().getPort()
            + "\", \"datanodes\": " + hdfs.cluster.getDataNodes().size()
            + ", \"datanode_ports\": " + hdfs.datanodePorts()
            + hdfs.extraJson()
            + ", \"pid\": " + ProcessHandle.current().pid()
            + ", \"log\": " + jsonString(log.getPath()) + "}");

    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      line = line.trim();
      if (line.isEmpty()) {
        continue;
      }
      if (line.equals("quit")) {
        break;
      }
      logStream.println("minihdfs: command: " + line);
      String answer;
      try {
        hdfs.run(line.split("\\s+"));
        answer = "ok";
      } catch (Throwable e) {
        e.printStackTrace(logStream);
        answer = "error: " + oneLine(e);
      }
      logStream.println("minihdfs: answer: " + answer);
      proto.println(answer);
    }
    hdfs.shutdown(down);
    proto.println("ok");
    // Hadoop leaves non-daemon threads behind; the cluster is down, so end here.
    System.exit(0);
  }

  private static Thread startWatchdog(int seconds, PrintStream err, File log) {
    Thread t =
        new Thread(
            () -> {
              try {
                Thread.sleep(seconds * 1000L);
              } catch (InterruptedException e) {
                return;
              }
              err.println("minihdfs: cluster not up after " + seconds + " s (log: " + log + ")");
              Runtime.getRuntime().halt(1);
            },
            "minihdfs-start-watchdog");
    t.setDaemon(true);
    t.start();
    return t;
  }

  /**
   * {@code start}, again on other ports while an {@code --ha} start fails on a port taken:
   * its NameNode ports are chosen free before the cluster binds them, and another process (a
   * test beside this one) may take one in between.
   */
  private static MiniHdfs startRetrying(
      File base, int datanodes, long blockSize, boolean ha, boolean kerberos, PrintStream log)
      throws Exception {
    for (int attempt = 1; ; attempt++) {
      try {
        return start(base, datanodes, blockSize, ha, kerberos);
      } catch (Exception e) {
        if (!ha || attempt >= START_ATTEMPTS || !causedBy(e, java.net.BindException.class)) {
          throw e;
        }
        e.printStackTrace(log);
        log.println("minihdfs: a chosen port was taken; starting again on other ports");
      }
    }
  }

  private static MiniHdfs start(
      File base, int datanodes, long blockSize, boolean ha, boolean kerberos) throws Exception {
    Configuration conf = new HdfsConfiguration();
    short replication = (short) Math.min(2, datanodes);
    conf.setInt("dfs.replication", replication);
    conf.setLong("dfs.blocksize", blockSize);
    // Small blocks let small fixtures span several blocks.
    conf.setLong("dfs.namenode.fs-limits.min-block-size", 0);
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.set("hadoop.tmp.dir", new File(base, "tmp").getPath());
    // Loopback only, by address: DataNodes register (and WebHDFS redirects to them) under this
    // name rather than the machine's hostname; MiniDFSCluster already binds every NameNode and
    // DataNode port to 127.0.0.1 on a free port.
    conf.set("dfs.datanode.hostname", LOOPBACK);
    conf.setBoolean("dfs.client.use.datanode.hostname", false);
    conf.setBoolean("dfs.datanode.use.datanode.hostname", false);
    // A stopped DataNode turns stale within 3 s and the NameNode then lists it last (what busy
    // clusters configure), so a read that starts after a stop goes to the live replica first.
    conf.setInt("dfs.heartbeat.interval", 1);
    conf.setLong("dfs.namenode.stale.datanode.interval", 3000);
    conf.setBoolean("dfs.namenode.avoid.read.stale.datanode", true);
    conf.setInt("dfs.namenode.safemode.extension", 0);
    // Hadoop clients inside this JVM (the DataNodes' WebHDFS handlers, the launcher's own) keep
    // idle NameNode connections 10 s by default; one kept across restart-namenode fails its next
    // call (EOFException, a 403 to a WebHDFS read). At 500 ms they are gone before the restarted
    // NameNode is up (which takes seconds).
    conf.setInt("ipc.client.connection.maxidletime", 500);
    // The launcher's own writes with one DataNode down: two-node clusters cannot replace one.
    conf.setBoolean("dfs.client.block.write.replace-datanode-on-failure.enable", false);

    // What a client needs to reach the cluster, written to BASE_DIR/conf as core-site.xml and
    // hdfs-site.xml (HADOOP_CONF_DIR for hdfs-native, modelfs's WebHDFS, Hadoop's own clients).
    Configuration core = new Configuration(false);
    Configuration site = new Configuration(false);
    Map<String, String> extra = new LinkedHashMap<>();
    if (kerberos) {
      secure(base, conf, core, site, extra);
    }

    MiniDFSCluster.Builder builder =
        // Its own subdirectory: formatting wipes it, and BASE_DIR holds the log.
        new MiniDFSCluster.Builder(conf, new File(base, "dfs"))
            .numDataNodes(datanodes)
            .format(true);
    if (ha) {
      // The standby reads the shared edits every second, so a failover has little to replay.
      conf.set("dfs.ha.tail-edits.period", "1s");
      // Fixed ports, chosen free here: each NameNode, the clients' conf_dir and a restarted
      // NameNode must agree on them.
      MiniDFSNNTopology.NSConf ns = new MiniDFSNNTopology.NSConf(NAMESERVICE);
      for (int i = 0; i < 2; i++) {
        ns.addNN(
            new MiniDFSNNTopology.NNConf("nn" + i).setIpcPort(freePort()).setHttpPort(freePort()));
      }
      builder.nnTopology(new MiniDFSNNTopology().addNameservice(ns));
    } else {
      builder.nameNodePort(0).nameNodeHttpPort(0);
    }
    MiniDFSCluster cluster = builder.build();
    if (ha) {
      cluster.transitionToActive(0);
    }
    cluster.waitActive();

    URI uri;
    if (ha) {
      uri = URI.create("hdfs://" + NAMESERVICE);
      site.set("dfs.nameservices", NAMESERVICE);
      site.set("dfs.ha.namenodes." + NAMESERVICE, "nn0,nn1");
      StringBuilder nns = new StringBuilder("[");
      for (int i = 0; i < 2; i++) {
        NameNode nn = cluster.getNameNode(i);
        String rpc = hostPort(nn.getNameNodeAddress());
        String http = hostPort(nn.getHttpAddress());
        site.set("dfs.namenode.rpc-address." + NAMESERVICE + ".nn" + i, rpc);
        site.set("dfs.namenode.http-address." + NAMESERVICE + ".nn" + i, http);
        nns.append(i > 0 ? ", " : "")
            .append(String.format("{\"id\": \"nn%d\", \"rpc\": \"%s\", \"http\": \"%s\"}",
                i, rpc, http));
      }
      site.set(
          "dfs.client.failover.proxy.provider." + NAMESERVICE,
          "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider");
      extra.put("nameservice", jsonString(NAMESERVICE));
      extra.put("namenodes", nns.append(']').toString());
    } else {
      uri = URI.create("hdfs://" + LOOPBACK + ":" + cluster.getNameNodePort(0));
    }
    core.set("fs.defaultFS", uri.toString());
    File confDir = new File(base, "conf");
    Files.createDirectories(confDir.toPath());
    writeXml(core, new File(confDir, "core-site.xml"));
    writeXml(site, new File(confDir, "hdfs-site.xml"));
    extra.put("conf_dir", jsonString(confDir.getPath()));

    // The launcher's own client reads the cluster as any client would, from conf_dir's files
    // (with --ha, through the failover proxy: put keeps working after a failover).
    Configuration client = new HdfsConfiguration(conf);
    client.addResource(new Path(new File(confDir, "core-site.xml").toURI()));
    client.addResource(new Path(new File(confDir, "hdfs-site.xml").toURI()));
    DistributedFileSystem fs = (DistributedFileSystem) FileSystem.newInstance(uri, client);
    return new MiniHdfs(cluster, fs, replication, extra);
  }

  /**
   * {@code --kerberos}: a KDC (Hadoop's MiniKdc) on a free loopback port, the principals and
   * keytabs, and the settings of a secure cluster in {@code conf} (the servers'), {@code core}
   * and {@code site} (the clients'); the launcher logs in as the superuser {@code hdfs}.
   */
  private static void secure(
      File base, Configuration conf, Configuration core, Configuration site,
      Map<String, String> extra) throws Exception {
    File kdcDir = new File(base, "kdc");
    Files.createDirectories(kdcDir.toPath());
    java.util.Properties kdcConf = MiniKdc.createConf();
    kdcConf.setProperty(MiniKdc.KDC_BIND_ADDRESS, KRB_HOST);
    MiniKdc kdc = new MiniKdc(kdcConf, kdcDir);
    kdc.start();
    Runtime.getRuntime().addShutdownHook(new Thread(kdc::stop));
    String realm = kdc.getRealm();
    File serviceKeytab = new File(base, "hdfs.keytab");
    kdc.createPrincipal(serviceKeytab, "hdfs/" + KRB_HOST, "HTTP/" + KRB_HOST);
    File userKeytab = new File(base, USER + ".keytab");
    kdc.createPrincipal(userKeytab, USER);
    String hdfs = "hdfs/" + KRB_HOST + "@" + realm;
    String http = "HTTP/" + KRB_HOST + "@" + realm;

    for (Configuration c : new Configuration[] {conf, core}) {
      c.set("hadoop.security.authentication", "kerberos");
      c.set("hadoop.rpc.protection", "authentication");
    }
    conf.setBoolean("hadoop.security.authorization", true);
    for (Configuration c : new Configuration[] {conf, site}) {
      c.set("dfs.namenode.kerberos.principal", hdfs);
      c.set("dfs.datanode.kerberos.principal", hdfs);
      // SASL on the DataNodes' data transfer: what lets a secure DataNode run on unprivileged
      // ports (with ignore.secure.ports.for.testing for its plain-HTTP server).
      c.set("dfs.data.transfer.protection", "authentication");
    }
    conf.set("dfs.namenode.keytab.file", serviceKeytab.getPath());
    conf.set("dfs.datanode.keytab.file", serviceKeytab.getPath());
    conf.setBoolean("dfs.block.access.token.enable", true);
    // WebHDFS (and every HTTP server) behind SPNEGO: since Hadoop 3.3 the NameNode's HTTP
    // filter is hadoop.http.authentication's, simple (user.name=) unless it says kerberos.
    conf.set("dfs.web.authentication.kerberos.principal", http);
    conf.set("dfs.web.authentication.kerberos.keytab", serviceKeytab.getPath());
    conf.set("hadoop.http.authentication.type", "kerberos");
    conf.set("hadoop.http.authentication.kerberos.principal", http);
    conf.set("hadoop.http.authentication.kerberos.keytab", serviceKeytab.getPath());
    conf.setBoolean("hadoop.http.authentication.simple.anonymous.allowed", false);
    conf.setBoolean("ignore.secure.ports.for.testing", true);

    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(hdfs, serviceKeytab.getPath());

    extra.put("krb5_conf", jsonString(kdc.getKrb5conf().getPath()));
    extra.put("realm", jsonString(realm));
    extra.put("principal", jsonString(USER + "@" + realm));
    extra.put("keytab", jsonString(userKeytab.getPath()));
  }

  /** Starts of an {@code --ha} cluster tried before giving up on ports taken under it. */
  private static final int START_ATTEMPTS = 4;

  /** Whether {@code e} or one of its causes is a {@code kind}. */
  private static boolean causedBy(Throwable e, Class<? extends Throwable> kind) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (kind.isInstance(t)) {
        return true;
      }
    }
    return false;
  }

  private static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getByName(LOOPBACK))) {
      return s.getLocalPort();
    }
  }

  private static String hostPort(InetSocketAddress a) {
    return LOOPBACK + ":" + a.getPort();
  }

  private static void writeXml(Configuration c, File f) throws Exception {
    try (FileOutputStream out = new FileOutputStream(f)) {
      c.writeXml(out);
    }
  }

  /** {@code , "key": value} for each extra field of the ready line. */
  private String extraJson() {
    StringBuilder b = new StringBuilder();
    extra.forEach((k, v) -> b.append(", ").append(jsonString(k)).append(": ").append(v));
    return b.toString();
  }

  private void run(String[] cmd) throws Exception {
    switch (cmd[0]) {
      case "ping":
        arity(cmd, 0);
        break;
      case "put": {
        arity(cmd, 2);
        Path dst = new Path(cmd[2]);
        fs.copyFromLocalFile(false, true, localPath(cmd[1]), dst);
        waitReplicated(fs, dst);
        break;
      }
      case "append": {
        arity(cmd, 2);
        Path dst = new Path(cmd[2]);
        try (FSDataOutputStream out = fs.append(dst)) {
          Files.copy(new File(cmd[1]).toPath(), out);
        }
        waitReplicated(fs, dst);
        break;
      }
      case "rm":
        arity(cmd, 1);
        if (!fs.delete(new Path(cmd[1]), true)) {
          throw new IllegalArgumentException("no such path: " + cmd[1]);
        }
        break;
      case "token": {
        // What YARN and Spark hand a container: the client's delegation tokens, in Hadoop's
        // token storage file (HADOOP_TOKEN_FILE_LOCATION).
        arity(cmd, 1);
        org.apache.hadoop.security.Credentials creds = new org.apache.hadoop.security.Credentials();
        if (fs.addDelegationTokens(UserGroupInformation.getCurrentUser().getShortUserName(), creds).length == 0) {
          throw new IllegalStateException("no delegation token issued (is the cluster --kerberos?)");
        }
        creds.writeTokenStorageFile(new Path(new File(cmd[1]).getAbsoluteFile().toURI()), fs.getConf());
        break;
      }
      case "chmod":
        arity(cmd, 2);
        fs.setPermission(new Path(cmd[2]), new FsPermission(cmd[1]));
        break;
      case "safemode":
        arity(cmd, 1);
        if (cmd[1].equals("enter")) {
          fs.setSafeMode(HdfsConstants.SafeModeAction.SAFEMODE_ENTER);
        } else if (cmd[1].equals("leave")) {
          fs.setSafeMode(HdfsConstants.SafeModeAction.SAFEMODE_LEAVE);
        } else {
          throw new IllegalArgumentException("safemode takes enter or leave");
        }
        break;
      case "stop-datanode": {
        arity(cmd, 1);
        int i = datanode(cmd[1]);
        if (stopped.containsKey(i)) {
          throw new IllegalStateException("datanode " + i + " is already stopped");
        }
        stopped.put(i, cluster.stopDataNode(currentIndex(i)));
        break;
      }
      case "restart-datanode": {
        arity(cmd, 1);
        int i = datanode(cmd[1]);
        // Same ports as before, so the NameNode's view and any client's cached address hold.
        MiniDFSCluster.DataNodeProperties props = stopped.remove(i);
        boolean up =
            props != null
                ? cluster.restartDataNode(props, true)
                : cluster.restartDataNode(currentIndex(i), true);
        if (!up) {
          throw new IllegalStateException("datanode " + i + " did not restart");
        }
        cluster.waitActive();
        break;
      }
      case "failover": {
        arity(cmd, 0);
        if (cluster.getNumNameNodes() < 2) {
          throw new IllegalStateException("failover needs --ha");
        }
        int active = cluster.getNameNode(0).isActiveState() ? 0 : 1;
        cluster.transitionToStandby(active);
        cluster.transitionToActive(1 - active);
        break;
      }
      case "restart-namenode":
        arity(cmd, 0);
        // Same RPC and HTTP ports; answer once it serves reads again (out of safe mode).
        cluster.restartNameNode(0, true);
        waitSafeModeOff();
        break;
      default:
        throw new IllegalArgumentException("unknown command " + cmd[0]);
    }
  }

  /**
   * Each DataNode's ports, by the index commands take: data transfer (what WebHDFS's
   * excludedatanodes names), HTTP (where WebHDFS redirects) and IPC. Restarts keep them.
   */
  private String datanodePorts() {
    StringBuilder b = new StringBuilder("[");
    for (DataNode dn : cluster.getDataNodes()) {
      b.append(b.length() > 1 ? ", " : "")
          .append(String.format(
              "{\"xfer\": %d, \"http\": %d, \"ipc\": %d}",
              dn.getXferPort(), dn.getInfoPort(), dn.getIpcPort()));
    }
    return b.append(']').toString();
  }

  private void shutdown(AtomicBoolean down) {
    if (down.compareAndSet(false, true)) {
      // Keep BASE_DIR (it holds the log): it is the caller's to remove.
      try {
        fs.close();
      } catch (Exception e) {
        // Shutting down regardless.
      }
      cluster.shutdown(false);
    }
  }

  private int datanode(String arg) {
    int i = Integer.parseInt(arg);
    if (i < 0 || i >= uuids.size()) {
      throw new IllegalArgumentException("no datanode " + i + " (0.." + (uuids.size() - 1) + ")");
    }
    return i;
  }

  private int currentIndex(int i) {
    List<DataNode> dns = cluster.getDataNodes();
    for (int j = 0; j < dns.size(); j++) {
      if (dns.get(j).getDatanodeUuid().equals(uuids.get(i))) {
        return j;
      }
    }
    throw new IllegalStateException("datanode " + i + " is not running");
  }

  /**
   * Waits until the NameNode lists every block of every file under {@code p} on as many DataNodes
   * as are running (up to the replication), so a DataNode stopped right after a put leaves a
   * replica the NameNode knows of.
   */
  private void waitReplicated(DistributedFileSystem fs, Path p) throws Exception {
    int want = Math.min(replication, cluster.getDataNodes().size());
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (true) {
      String missing = underReplicated(fs, p, want);
      if (missing == null) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            missing + " has fewer than " + want + " replicas after 60 s");
      }
      Thread.sleep(100);
    }
  }

  private static String underReplicated(DistributedFileSystem fs, Path p, int want)
      throws Exception {
    FileStatus st = fs.getFileStatus(p);
    List<LocatedFileStatus> files = new ArrayList<>();
    if (st.isDirectory()) {
      RemoteIterator<LocatedFileStatus> it = fs.listFiles(p, true);
      while (it.hasNext()) {
        files.add(it.next());
      }
    } else {
      files.add((LocatedFileStatus) fs.listLocatedStatus(p).next());
    }
    for (LocatedFileStatus f : files) {
      for (BlockLocation b : fs.getFileBlockLocations(f.getPath(), 0, f.getLen())) {
        if (b.getHosts().length < want) {
          return f.getPath().toUri().getPath();
        }
      }
    }
    return null;
  }

  private void waitSafeModeOff() throws Exception {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (cluster.getNameNode(0).isInSafeMode()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("namenode still in safe mode after 60 s");
      }
      Thread.sleep(100);
    }
  }

  private static Path localPath(String p) {
    return new Path(new File(p).getAbsoluteFile().toURI());
  }

  private static void arity(String[] cmd, int n) {
    if (cmd.length != n + 1) {
      throw new IllegalArgumentException(cmd[0] + " takes " + n + " argument(s)");
    }
  }

  private static String oneLine(Throwable e) {
    String msg =
        e.getMessage() == null
            ? e.toString()
            : e.getClass().getSimpleName() + ": " + e.getMessage();
    int nl = msg.indexOf('\n');
    return nl < 0 ? msg : msg.substring(0, nl);
  }

  private static String jsonString(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  private static void die(String msg) {
    System.err.println("minihdfs: " + msg);
    System.exit(2);
  }
}
