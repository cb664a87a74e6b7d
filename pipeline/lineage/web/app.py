"""`bigtrain ui`: a read-only Flask app over one MLMD store. Every page is rendered on the server
from the lineage package's queries (the answers `bigtrain lineage` prints), with autoescaping
Jinja templates; the store is opened read-only per request and never written; files are read
only from inside the store's artifact folders (the run logs' folder and the pipeline root), never
from the rest of the home (metadata.sqlite, the lock)."""

from __future__ import annotations

import json
import os
import time
from typing import Callable, Collection

import flask
from werkzeug.exceptions import HTTPException, NotFound

from components.evaluation import properties as eval_props
from components.common.errors import MetadataStoreError, NotFoundError
from pipeline.lineage import explore, queries, record, report, resume, run_diff
from pipeline.lineage.store import PREEMPTED, Lineage, properties
from pipeline.lineage.web import curves, layout

STATES = ("complete", "failed", "abandoned", "preempted", "running")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# the variants table: each variant's <variant>_<figure> properties (components/evaluation/properties.py)
VARIANT_FIGURES = (eval_props.VARIANT_FIGURES + eval_props.VARIANT_COUNTS
                   + (eval_props.FIT_TO_SERVE, eval_props.VARIANT_REASON))


def allowed_hosts(host: str, port: int, extra: Collection[str] = ()) -> list[str]:
    """The Host headers `bigtrain ui` answers on HOST:PORT: the loopback names and the bound
    address with the port, and each --allow-host name (a name without a port: any port).
    Anything else is refused (421), so a page on another site whose name was re-pointed at
    127.0.0.1 (DNS rebinding) cannot read the store through the visitor's browser."""
    bound = f"[{host}]" if ":" in host else host
    names = [f"{name}:{port}" for name in dict.fromkeys((*LOOPBACK_NAMES, bound))]
    if port == 80:  # browsers leave the default port out
        names += list(dict.fromkeys((*LOOPBACK_NAMES, bound)))
    return names + [name.lower() for name in extra]


def host_allowed(header: str, allowed: Collection[str]) -> bool:
    """header (the request's Host) against allowed (allowed_hosts): exact 'name:port' entries,
    or a bare name matching that name on any port."""
    header = header.strip().lower()
    name = header.rsplit(":", 1)[0] if not header.endswith("]") else header
    return header in allowed or name in allowed


def create_app(open_lineage: Callable[[], Lineage], file_roots: list[str],
               diagnose_store: Callable[[], None] = lambda: None,
               hosts: Collection[str] = LOOPBACK_NAMES) -> flask.Flask:
    """open_lineage: a fresh read-only Lineage per request; file_roots: the only folders files
    are read from (the home's run logs and pipeline root: runners/local/home.py readable_folders;
    []: no file is read). diagnose_store: raises the named MetadataStoreError of a damaged store
    after MLMD failed on it (store.diagnose). hosts: the Host headers answered (allowed_hosts;
    default: the loopback names on any port)."""
    app = flask.Flask(__name__)
    app.config.update(FILE_ROOTS=[os.path.realpath(root) for root in file_roots],
                      ALLOWED_HOSTS=[h.lower() for h in hosts])
    app.jinja_env.filters.update(when=_when, fig=_fig)

    @app.before_request
    def _open():
        flask.g.started = time.perf_counter()
        _check_host(app)  # before the store is opened
        flask.g.lin = open_lineage()

    @app.after_request
    def _headers(response):
        response.headers["X-Content-Type-Options"] = "nosniff"
        if "started" in flask.g:
            response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - flask.g.started) * 1e3:.1f}"
        return response

    @app.errorhandler(MetadataStoreError)
    def _store_error(err):
        return flask.render_template("error.html", title="metadata store unusable",
                                     message=str(err)), 503

    @app.errorhandler(RuntimeError)  # MLMD's raw query errors: name a damaged store
    def _store_failed(err):
        try:
            diagnose_store()
        except MetadataStoreError as named:
            return _store_error(named)
        raise err

    @app.errorhandler(NotFoundError)  # an unknown run or id in the address; a KeyError is a bug (500)
    def _not_found_lookup(err):
        return flask.render_template("error.html", title="not found", message=str(err)), 404

    @app.errorhandler(HTTPException)
    def _http(err):
        return flask.render_template("error.html", title=f"{err.code} {err.name}",
                                     message=err.description), err.code

    _routes(app)
    return app


class MisdirectedRequest(HTTPException):
    code, name = 421, "Misdirected Request"


def _check_host(app: flask.Flask) -> None:
    header = flask.request.headers.get("Host", "")
    if not host_allowed(header, app.config["ALLOWED_HOSTS"]):
        raise MisdirectedRequest(
            f"this server does not answer for host {header!r} (it answers "
            f"{', '.join(app.config['ALLOWED_HOSTS'])}); a name that reaches it through a proxy "
            "is added with `bigtrain ui --allow-host NAME`")


def _lin() -> Lineage:
    return flask.g.lin


def _routes(app: flask.Flask) -> None:
    """Every page of the app (views below, each reading the lineage package only)."""
    app.add_url_rule("/", view_func=runs, methods=["GET"])
    app.add_url_rule("/run/<path:run_id>", view_func=run, methods=["GET"])
    app.add_url_rule("/run/<path:run_id>/log", view_func=run_log, methods=["GET"])
    app.add_url_rule("/run/<path:run_id>/curves", view_func=run_curves, methods=["GET"])
    app.add_url_rule("/artifact/<int:artifact_id>", view_func=artifact, methods=["GET"])
    app.add_url_rule("/execution/<int:execution_id>", view_func=execution, methods=["GET"])
    app.add_url_rule("/models", view_func=models, methods=["GET"])
    app.add_url_rule("/diff", view_func=diff, methods=["GET"])


def runs():
    state = flask.request.args.get("state") or None
    if state not in (None, *STATES):
        raise NotFound(f"unknown state {state!r}; one of {', '.join(STATES)}")
    offset = max(0, flask.request.args.get("offset", 0, type=int))
    limit = min(100, max(1, flask.request.args.get("limit", 20, type=int)))
    page = queries.runs_page(_lin(), limit=limit, offset=offset, state=state)
    return flask.render_template("runs.html", page=page, state=state, states=STATES,
                                 offset=offset, limit=limit)

def run(run_id):
    lin = _lin()
    the_run = lin.run(run_id)
    rep = report.run_report(lin.store, the_run.name, lineage=lin)
    graph = layout.layered(queries.graph(lin, the_run.name))
    examples = rep.output("Examples")
    tuner = rep.output("TunerResults")
    trials = json.loads(tuner.get("trials_json") or "[]") if tuner else []
    return flask.render_template(
        "run.html", rep=rep, run=the_run, graph=graph, summarize=report.summarize,
        counters=[(n, examples[n]) for n in report.DATA_COUNTERS if n in examples],
        trials=trials, trial_keys=sorted({k for t in trials for k in t["values"]}),
        tuner=tuner, run_props=properties(the_run), why=queries.why(lin, the_run.name),
        trackers=queries.trackers_of(properties(the_run)))

def run_log(run_id):
    log = properties(_lin().run(run_id)).get(record.RUN_LOG)
    path = _inside_artifact_folders(flask.current_app, log)
    if path is None or not os.path.isfile(path):
        raise NotFound(f"no readable log for run {run_id} inside the store's artifact folders")
    return flask.send_file(path, mimetype="text/plain")

def run_curves(run_id):
    rep = report.run_report(_lin().store, _lin().run(run_id).name, lineage=_lin())
    model_run = rep.output("ModelRun")
    log_dir = _inside_artifact_folders(flask.current_app, model_run.get("uri"))
    if model_run.get("uri") and log_dir is None:
        raise NotFound(f"the ModelRun folder {model_run['uri']} of run {run_id} lies outside the "
                       "store's artifact folders: not read")
    scalars = curves.read_scalars(log_dir) if log_dir and os.path.isdir(log_dir) else {}
    charts = [(title, curves.svg_chart(scalars[tag], title)) for tag, title in curves.CURVES
              if scalars.get(tag)]
    missing = [title for tag, title in curves.CURVES if not scalars.get(tag)]
    return flask.render_template("curves.html", rep=rep, charts=charts, missing=missing,
                                 log_dir=model_run.get("uri"), **_preempted_trainer(rep))


def _preempted_trainer(rep) -> dict:
    """A run whose Trainer was preempted (no ModelRun): its message and the run that carried its
    training on (pipeline/lineage/resume.py), whose curves hold its figures."""
    trainer = rep.stage("Trainer")
    if trainer is None or trainer.state != PREEMPTED or "ModelRun" in trainer.outputs:
        return {}
    stopped = _lin().execution(trainer.execution_id).last_update_time_since_epoch
    return {"preempted": trainer.note, "resumed_by": resume.resumed_by(_lin(), trainer.note, stopped)}

def artifact(artifact_id):
    """?page=N: the Nth page (queries.PAGE_SIZE) of the cached runs that reused the artifact and
    of its readers, instead of the first and last few."""
    lin, page = _lin(), _page()
    record_ = queries.artifact_record(lin, artifact_id, full=True)
    graph = explore.neighborhood(lin, artifact_id)
    up = queries.trace_step(lin, artifact_id, page=page)   # this artifact's step, not the chain
    down = explore.trace_step_down(lin, artifact_id, page=page)
    producer = lin.producer(artifact_id)
    return flask.render_template(
        "artifact.html", art=record_, graph=layout.layered(graph), graph_data=graph,
        up=up, down=down, variants=_variants(record_["properties"]), page=page,
        per_page=queries.PAGE_SIZE,
        producer=producer and queries.execution_record(lin, producer),
        producer_inputs=lin.inputs(producer) if producer else {})


def execution(execution_id):
    """An execution's page is its run's: a redirect there. The artifact page's graph links its
    execution nodes here, so drawing them reads no run per node (MLMD finds an execution's
    contexts by scanning every association: 15 ms each at 10,000 runs)."""
    runs = _lin().runs_of_execution(_lin().execution(execution_id).id)
    if not runs:
        raise NotFound(f"execution {execution_id} belongs to no run")
    return flask.redirect(flask.url_for("run", run_id=runs[0]))


def _page() -> int | None:
    """The ?page= argument: None when absent, else a whole number from 1 (anything else: 404)."""
    raw = flask.request.args.get("page")
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1 or len(raw) > 9:
        raise NotFound(f"page {raw!r}: pages are numbered 1, 2, ...")
    return int(raw)

def models():
    lin = _lin()
    offset = max(0, flask.request.args.get("offset", 0, type=int))
    page = queries.runs_page(lin, limit=20, offset=offset)
    pushed = [r for r in page["runs"] if r["pushed_version"]]
    rows = [explore.pushed_model(lin, r["run_id"]) for r in pushed]
    return flask.render_template("models.html", rows=rows, page=page, offset=offset,
                                 runs=page["runs"], variants=_variants)

def diff():
    a, b = flask.request.args.get("a"), flask.request.args.get("b")
    if not a or not b:
        raise NotFound("diff needs two runs: /diff?a=RUN&b=RUN")
    return flask.render_template("diff.html", d=run_diff.diff(_lin(), a, b))


def _inside_artifact_folders(app: flask.Flask, path: str | None) -> str | None:
    """path resolved (symlinks too) when it lies inside one of the store's artifact folders
    (FILE_ROOTS), else None."""
    if not path:
        return None
    real = os.path.realpath(path)
    return next((real for root in app.config["FILE_ROOTS"]
                 if os.path.commonpath([real, root]) == root), None)


def _when(ms) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def _fig(value) -> str:
    """Figures for tables: floats to 4 significant digits, missing as '-'."""
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def serve(open_lineage: Callable[[], Lineage], file_roots: list[str], host: str, port: int,
          diagnose_store: Callable[[], None] = lambda: None, allow_hosts: Collection[str] = (),
          announce: Callable[[int], None] = lambda port: None) -> None:
    """Run the app with werkzeug's threaded server (one user on a laptop; no deployment) bound
    to host:port (0: a free port the system picks), answering the Host headers allowed_hosts
    names for the port it is bound to; announce(that port) once it listens."""
    from werkzeug.serving import make_server
    app = create_app(open_lineage, file_roots, diagnose_store)
    server = make_server(host, port, app, threaded=True)
    app.config["ALLOWED_HOSTS"] = [h.lower() for h in
                                   allowed_hosts(host, server.server_port, allow_hosts)]
    curves.warm_up()  # matplotlib, tensorboard, networkx imports: seconds, once, before page one
    announce(server.server_port)
    server.serve_forever()


def _variants(props: dict) -> list[dict]:
    """The exported variants of a ModelEvaluation's properties: one row per variant."""
    names = [n for n in str(props.get(eval_props.VARIANTS, "")).split(",") if n]
    return [dict(name=n, serve=n == props.get(eval_props.SERVE_VARIANT),
                 **{f: props.get(eval_props.variant_property(n, f)) for f in VARIANT_FIGURES})
            for n in names]
