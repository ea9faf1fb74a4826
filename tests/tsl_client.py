#!/usr/bin/env python3
"""A tensorflow.ProfilerService client built only from profctl's own .proto files captures a real
profctl-agent exactly the way TensorFlow's client does, and saves the file it would save.

TensorFlow's client (`tf.profiler.experimental.client.trace`, TensorBoard's "Capture Profile";
tsl/profiler/rpc/client capture_profile.cc and save_profile.cc) sends one Profile per host with
opts.version = 1, both durations, start_timestamp_ns = now + delay, session_id = a timestamp,
host_name = the address it dialled, repository_root = <logdir>/plugins/profile and emit_xspace
unset, with the deadline max(60 s, 2 * duration); then, unless empty_trace, it writes every
tool_data entry to <repository_root>/<session>/<address with ':' -> '_'>.<tool name>. This test
does the same with Debian's python3-grpcio and python3-protobuf: the Python message classes are
generated at test time with `protoc --python_out`, and the method is called through
grpc.unary_unary (no grpc_tools plugin needed). It then checks the saved file is an XSpace with
events whose line times are relative to the profile start (as XProf reads them), that
`profctl analyze` finds the synthetic job's steps in it, and that a newer client's emit_xspace
gets the XSpace inline instead.

Exit status: 0 pass, 1 fail, 77 skipped (python3-grpcio or python3-protobuf missing: install them
with scripts/bootstrap.sh --test).

Usage: tsl_client.py --agent=PATH --protoc=PATH --proto-dir=DIR [--profctl=PATH] [--xprof-check=PATH]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "py"))
from profctl_testlib import Failure, Processes, check  # noqa: E402

SKIP = 77
PROTOS = [
    "tensorflow/profiler/xplane.proto",
    "tensorflow/profiler/profiler_options.proto",
    "tensorflow/profiler/profiler_service.proto",
]
# What TensorFlow's client asks for (PopulateProfileRequest).
TF_TOOLS = [
    "trace_viewer", "op_profile", "input_pipeline", "kernel_stats", "memory_viewer",
    "memory_profile", "overview_page", "pod_viewer", "tensorflow_stats", "xplane.pb",
]
DURATION_MS = 500


def generate_messages(protoc, proto_dir, out_dir):
    os.makedirs(out_dir)
    generated = subprocess.run([protoc, f"-I{proto_dir}", f"--python_out={out_dir}", *PROTOS],
                               capture_output=True, text=True)
    check(generated.returncode == 0, f"protoc --python_out failed: {generated.stderr}")
    sys.path.insert(0, out_dir)
    from tensorflow.profiler import profiler_service_pb2, xplane_pb2  # noqa: E402
    return profiler_service_pb2, xplane_pb2


def tf_profile_request(pb, address, repository_root, session):
    """The request TensorFlow's client sends (capture_profile.cc PopulateProfileRequest)."""
    request = pb.ProfileRequest()
    request.duration_ms = DURATION_MS
    request.max_events = 1000000
    request.repository_root = repository_root
    request.session_id = session
    request.host_name = address
    request.tools.extend(TF_TOOLS)
    opts = request.opts
    opts.version = 1
    opts.host_tracer_level = 2
    opts.device_tracer_level = 1
    opts.duration_ms = DURATION_MS
    opts.start_timestamp_ns = time.time_ns()  # delay_ms = 0
    opts.session_id = session
    return request


def save_profile(repository_root, session, address, response):
    """TensorFlow's SaveProfile: every tool_data entry as <run>/<address with ':' -> '_'>.<name>."""
    run_dir = os.path.join(repository_root, session)
    os.makedirs(run_dir, exist_ok=True)
    host = address.replace(":", "_")
    written = []
    for tool in response.tool_data:
        path = os.path.join(run_dir, f"{host}.{tool.name}")
        with open(path, "wb") as f:
            f.write(tool.data)
        written.append(path)
    return written


def count_events(space):
    return sum(len(line.events) for plane in space.planes for line in plane.lines)


def check_xspace(space, what, host):
    events = count_events(space)
    check(events > 0, f"{what}: the XSpace has no events")
    # The host as the client names it (its file stem), which XProf requires in hostnames[0].
    check(list(space.hostnames) == [host],
          f"{what}: hostnames {list(space.hostnames)}, expected [{host!r}]")
    env = [p for p in space.planes if p.name == "Task Environment"]
    check(len(env) == 1, f"{what}: no 'Task Environment' plane")
    names = {m.id: m.name for m in env[0].stat_metadata.values()}
    stats = {names.get(s.metadata_id): s.uint64_value for s in env[0].stats}
    start, stop = stats.get("profile_start_time", 0), stats.get("profile_stop_time", 0)
    window_ms = (stop - start) / 1e6
    check(start > 0 and DURATION_MS <= window_ms < DURATION_MS + 1000,
          f"{what}: profile window {start}..{stop} ({window_ms} ms) is not {DURATION_MS} ms")
    for plane in space.planes:
        for line in plane.lines:
            # Relative to the profile start, as XProf computes times in int64 picoseconds.
            check(0 <= line.timestamp_ns < 3600 * 10**9,
                  f"{what}: line '{line.name}' of '{plane.name}' has timestamp_ns "
                  f"{line.timestamp_ns}, not relative to the profile start")
    return events


def run(args):
    try:
        import grpc  # noqa: F401
        import google.protobuf  # noqa: F401
    except ImportError as e:
        print(f"SKIPPED: {e} (install python3-grpcio and python3-protobuf: "
              "scripts/bootstrap.sh --test)")
        return SKIP
    import grpc

    with tempfile.TemporaryDirectory(prefix="profctl_tsl_client_") as scratch:
        pb, xplane = generate_messages(args.protoc, args.proto_dir, os.path.join(scratch, "gen"))
        procs = Processes(scratch, grace_s=30)
        log_path = procs.log_path("agent")
        try:
            port = procs.start_agent(args.agent, "agent", ["--name=tsl-test-host"])
            proc = procs.get("agent")
            address = f"127.0.0.1:{port}"
            # TensorFlow raises the receive limit to the largest message protobuf allows.
            channel = grpc.insecure_channel(
                address, options=[("grpc.max_receive_message_length", 2**31 - 1)])
            profile = channel.unary_unary(
                "/tensorflow.ProfilerService/Profile",
                request_serializer=pb.ProfileRequest.SerializeToString,
                response_deserializer=pb.ProfileResponse.FromString)

            # 1. Exactly as TensorFlow's client: tool_data saved by the client.
            logdir = os.path.join(scratch, "logdir")
            repository_root = os.path.join(logdir, "plugins", "profile")
            session = time.strftime("%Y_%m_%d_%H_%M_%S")
            request = tf_profile_request(pb, address, repository_root, session)
            response = profile(request, timeout=max(60.0, 2 * DURATION_MS / 1000))
            check(not response.empty_trace, "empty_trace is set")
            check(not response.HasField("xspace"), "xspace set though emit_xspace was not")
            check([t.name for t in response.tool_data] == ["xplane.pb"],
                  f"tool_data {[t.name for t in response.tool_data]}, expected ['xplane.pb']")
            written = save_profile(repository_root, session, address, response)
            expected = os.path.join(repository_root, session, f"127.0.0.1_{port}.xplane.pb")
            check(written == [expected], f"saved {written}, expected [{expected}]")
            # Without --tsl-save-root the agent never writes into repository_root itself.
            run_files = os.listdir(os.path.dirname(expected))
            check(run_files == [os.path.basename(expected)], f"the run folder holds {run_files}")
            space = xplane.XSpace()
            with open(expected, "rb") as f:
                space.ParseFromString(f.read())
            events = check_xspace(space, expected, f"127.0.0.1_{port}")
            print(f"ok: TensorFlow-style capture saved {expected} ({events} events)")
            # Every XProf tool can read it: our conformance checker on the saved file.
            if args.xprof_check:
                checked = subprocess.run([args.xprof_check, expected], capture_output=True,
                                         text=True)
                check(checked.returncode == 0,
                      f"xprof_check {expected} exited {checked.returncode}: "
                      f"{checked.stdout}{checked.stderr}")
                print("ok: the saved file passes the XProf conformance checker")

            # 2. profctl analyze reads the saved run like any TensorFlow run folder.
            if args.profctl:
                analyzed = subprocess.run(
                    [args.profctl, "analyze", os.path.join(repository_root, session), "--json"],
                    capture_output=True, text=True)
                check(analyzed.returncode == 0,
                      f"profctl analyze exited {analyzed.returncode}: {analyzed.stderr}")
                hosts = json.loads(analyzed.stdout)["hosts"]
                check([h["host"] for h in hosts] == [f"127.0.0.1_{port}"],
                      f"profctl analyze hosts {[h['host'] for h in hosts]}")
                # 500 ms of the synthetic job's 100 ms steps: at least 3 whole ones.
                check(hosts[0]["steps"] >= 3, f"profctl analyze found {hosts[0]['steps']} steps")
                print(f"ok: profctl analyze finds {hosts[0]['steps']} steps in the saved run")

            # 3. A newer client (emit_xspace): the XSpace inline in field 8, no tool_data.
            request = tf_profile_request(pb, address, repository_root, session + "_inline")
            request.emit_xspace = True
            response = profile(request, timeout=60.0)
            check(not response.empty_trace, "emit_xspace: empty_trace is set")
            check(response.HasField("xspace"), "emit_xspace: no inline xspace")
            check(len(response.tool_data) == 0, "emit_xspace: the trace was also sent as tool_data")
            events = check_xspace(response.xspace, "inline xspace", f"127.0.0.1_{port}")
            print(f"ok: emit_xspace answered inline ({events} events)")

            # 4. Monitor is not implemented, as in open-source TensorFlow servers.
            monitor = channel.unary_unary(
                "/tensorflow.ProfilerService/Monitor",
                request_serializer=pb.MonitorRequest.SerializeToString,
                response_deserializer=pb.MonitorResponse.FromString)
            try:
                monitor(pb.MonitorRequest(duration_ms=10), timeout=30.0)
                raise Failure("Monitor answered OK")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.UNIMPLEMENTED,
                      f"Monitor answered {e.code()}, expected UNIMPLEMENTED")
            channel.close()
        except (Failure, grpc.RpcError) as e:
            with open(log_path) as log:
                sys.stderr.write(f"agent log:\n{log.read()}\n")
            print(f"FAILED: {e}", file=sys.stderr)
            return 1
        finally:
            procs.stop_all()
        proc = procs.get("agent")
        if proc.returncode != 0:
            with open(log_path) as log:
                sys.stderr.write(f"agent log:\n{log.read()}\n")
            print(f"FAILED: profctl-agent exited with {proc.returncode} on SIGTERM",
                  file=sys.stderr)
            return 1
    print("PASSED")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True, help="profctl-agent binary")
    parser.add_argument("--protoc", required=True, help="protoc binary")
    parser.add_argument("--proto-dir", required=True, help="profctl's proto/ folder")
    parser.add_argument("--profctl", help="profctl binary (checks `profctl analyze` too)")
    parser.add_argument("--xprof-check", help="xprof_check binary (runs the conformance checker "
                        "on the saved file)")
    try:
        return run(parser.parse_args())
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
