import collections
import pytest
import schemathesis
from schemathesis import engine
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events
from rest_framework.authtoken.models import Token
from annotator.wsgi import application
from tests.url_matrix import ADMIN, build_world


@pytest.mark.django_db(transaction=True)
def test_probe(private_broker, live_server):
    world = build_world()
    token = Token.objects.create(user=world.users[ADMIN])
    import os
    n = int(os.environ.get("ST_N", "20"))
    cfg = SchemathesisConfig.from_str(f'''
seed = 7
workers = 1
continue-on-failure = true
[auth.openapi.tokenAuth]
api_key = "Token {token.key}"
[generation]
max-examples = {n}
[checks]
enabled = true
[parameters]
slug = "{world.project.slug}"
judge = "{world.judge.name}"
training_set = "{world.training_set.name}"
query_external_id = "{world.query.external_id}"
''')
    schema = schemathesis.openapi.from_url(live_server.url + "/api/schema/", config=cfg,
                                            headers={"Authorization": f"Token {token.key}"})
    out = collections.Counter()
    details = {}
    for ev in engine.from_schema(schema).execute():
        if isinstance(ev, events.NonFatalError):
            print("NONFATAL", ev.label, ev.info)
        if isinstance(ev, events.FatalError):
            print("FATAL", ev.exception)
        fl = []
        if isinstance(ev, (events.ScenarioFinished, events.FuzzScenarioFinished)):
            for cid, nodes in ev.recorder.checks.items():
                for n in nodes:
                    if n.failure_info is None: continue
                    f = n.failure_info.failure
                    fl.append(f)
                    key = (f.operation, f.title)
                    if key not in details:
                        inter = ev.recorder.interactions.get(cid)
                        body = ""
                        if inter is not None and inter.response is not None:
                            body = str(inter.response.status_code) + " " + (inter.response.content or b"")[:300].decode("utf-8", "replace")
                        details[key] = f.message[:500] + "\n" + n.failure_info.code_sample[:600] + "\n>> " + body
        if isinstance(ev, events.EngineFinished):
            fl += ev.failures
        if fl:
            for f in fl:
                key = (f.operation, f.title)
                out[key] += 1
                details.setdefault(key, f.message[:600])
    for k, v in sorted(out.items(), key=str):
        print(v, k, "\n    ", details[k].replace("\n", "\n     "))
    print("TOTAL", sum(out.values()))
