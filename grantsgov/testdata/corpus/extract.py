"""Takes the corpus again from a checkout of HHS/simpler-grants-gov.

Each .body is either a test's expected response, evaluated as the test
writes it, or the output of the mirror's own response function, run as
written with uuid.uuid4 fixed; the .note beside it says which, and the
values put in for the test's placeholders.

    MIRROR=/path/to/simpler-grants-gov python3 extract.py
"""
import subprocess, types, os, re, uuid
REPO=os.environ.get("MIRROR", "/work/.mirror/HHS+simpler-grants-gov/repo")
COMMIT="32d9a126f4f2f54228d77abe8ea4e2395b2c78d6"
OUT=os.path.dirname(os.path.abspath(__file__))
os.makedirs(OUT, exist_ok=True)
def show(path):
    return subprocess.check_output(["git","-C",REPO,"show",f"{COMMIT}:{path}"]).decode().split("\n")
TEST_UUID="00000000-aaaa-0000-bbbb-000000000000"
ns=dict(TEST_UUID=TEST_UUID,test_uuid=TEST_UUID,SIMPLER_TRACKING_NUMBER="GRANT80000008",
        submission=types.SimpleNamespace(legacy_tracking_number=80000008),
        tracking_number=types.SimpleNamespace(text="GRANT80000008"))
def block(path, start):
    lines=show(path)
    i=start-1
    assert "= (" in lines[i], lines[i]
    buf=[]
    j=i+1
    while not lines[j].strip().startswith(")"):
        buf.append(lines[j]); j+=1
    val=eval("(\n"+"\n".join(buf)+"\n)", ns)
    return val.encode() if isinstance(val,str) else val, (start, j+1)
MTOM_CT='multipart/related; type="application/xop+xml"; boundary="uuid:{b}"; start="<root.message@cxf.apache.org>"; start-info="text/xml"'
BASE_CT='multipart/related; type="application/xop+xml"'
def write(name, body, status, ct, source, how, placeholders=""):
    open(f"{OUT}/{name}.body","wb").write(body)
    with open(f"{OUT}/{name}.note","w") as f:
        f.write(f"status: {status}\ncontent-type: {ct}\nrepository: HHS/simpler-grants-gov\ncommit: {COMMIT}\n")
        f.write(f"source: {source}\nhow: {how}\n")
        if placeholders: f.write(f"placeholders: {placeholders}\n")
R="api/tests/src/legacy_soap_api/test_legacy_soap_api_routes.py"
def route(name, start, ct, status=500, placeholders=""):
    body,(a,b)=block(R,start)
    write(name, body, status, ct, f"{R} lines {a}-{b}", "the test's expected response body, evaluated byte for byte", placeholders)
route("confirm-delivery-authorization-failure", 263, MTOM_CT.format(b=TEST_UUID))
route("confirm-delivery-status-received-by-agency", 482, MTOM_CT.format(b=TEST_UUID), placeholders="TEST_UUID = "+TEST_UUID+" (the test's constant); submission.legacy_tracking_number = 80000008 (a factory value in the test)")
route("confirm-delivery-status-tracking-number-assigned", 638, MTOM_CT.format(b=TEST_UUID), placeholders="TEST_UUID as the test defines it; submission.legacy_tracking_number = 80000008 (a factory value)")
route("confirm-delivery-no-application-status", 714, MTOM_CT.format(b=TEST_UUID), placeholders="TEST_UUID as the test defines it")
route("confirm-delivery-status-received", 779, MTOM_CT.format(b=TEST_UUID), placeholders="TEST_UUID as the test defines it; submission.legacy_tracking_number = 80000008 (a factory value)")
route("get-application-not-found", 907, MTOM_CT.format(b=TEST_UUID), placeholders="test_uuid and SIMPLER_TRACKING_NUMBER (GRANT80000008) as the test defines them")
route("get-application-zip-not-found", 963, MTOM_CT.format(b=TEST_UUID), placeholders="test_uuid as the test defines it")
route("missing-certificate", 1217, BASE_CT)
route("no-tcertificate", 1252, BASE_CT)
route("certificate-expired", 1292, BASE_CT)
import ast
U="api/src/legacy_soap_api/legacy_soap_api_utils.py"
src="\n".join(show(U))
tree=ast.parse(src)
fns={}
for node in tree.body:
    if isinstance(node, ast.FunctionDef) and node.name in ("get_soap_error_response","get_soap_fault_error_response","get_soap_proxy_failed_to_update_application_info","format_local_soap_response","get_auth_error_response"):
        fns[node.name]=(node.lineno,node.end_lineno,ast.get_source_segment(src,node))
class Resp:
    def __init__(s,data,status_code,headers): s.data,s.status_code,s.headers=data,status_code,headers
BASE={"Content-Type": BASE_CT}
def get_soap_response(data, status_code=200, headers=None):
    return Resp(data,status_code,{**BASE,**(headers or {})})
class FakeUUID:
    @staticmethod
    def uuid4(): return TEST_UUID
env=dict(get_soap_response=get_soap_response, uuid=FakeUUID, SOAPResponse=Resp)
for n,(a,b,s) in fns.items():
    exec(s, env)
def run(name, fn, args, kwargs, used, text_src, placeholders="uuid.uuid4() = "+TEST_UUID):
    r=env[fn](*args, **kwargs)
    a,b,_=fns[fn]
    ct=r.headers["Content-Type"]
    how=f"{U} lines {a}-{b} ({fn}), run as written with uuid.uuid4 fixed"
    write(name, r.data, r.status_code, ct, f"{text_src}", how, placeholders)
FG="api/src/legacy_soap_api/grantors/fault_messages.py"
FA="api/src/legacy_soap_api/applicants/fault_messages.py"
def fm(path, varname):
    lines=show(path)
    for i,l in enumerate(lines):
        if l.startswith(varname+" = FaultMessage("):
            j=i
            while not lines[j].startswith(")"): j+=1
            txt="\n".join(lines[i+1:j])
            m=re.search(r'faultstring=(".*?"),\n', txt+"\n", re.S)
            return eval(m.group(1)), f"{path} lines {i+1}-{j+1} ({varname})"
    raise KeyError(varname)
for name,path,var in [("validation-tracking-number-pattern",FG,"InvalidGrantsGovTrackingNumber"),
                      ("validation-tracking-number-missing",FG,"MissingGrantsGovTrackingNumber"),
                      ("confirm-delivery-already-retrieved",FG,"ConfirmDeliveryAlreadyRetrieved"),
                      ("opportunity-list-filter-required",FA,"OpportunityListRequestInvalidParams")]:
    text,src_=fm(path,var)
    run(name,"get_soap_fault_error_response",(),dict(faultcode="soap:Server",faultstring=text),None,
        f"faultstring: {src_}; framing: {U} get_soap_fault_error_response, which api/src/legacy_soap_api/simpler_soap_api.py uses for a SOAPFaultException")
run("submission-list-invalid-filter","get_soap_fault_error_response",(),dict(faultcode="soap:Server",faultstring="Encountered invalid filter type XXXXXXXXXX"),None,
    "faultstring: api/src/legacy_soap_api/grantors/schemas/get_submission_list_schemas.py lines 114-119, with the filter type of api/tests/src/legacy_soap_api/test_legacy_soap_api_routes.py line 1611; framing: get_soap_fault_error_response (simpler_soap_api.py, except SOAPInvalidFilter)")
run("server-error","get_soap_error_response",(),{},None,"api/src/legacy_soap_api/simpler_soap_api.py (except Exception: get_soap_error_response()), default faultstring of the function", placeholders="")
run("authorization-error","get_auth_error_response",(),{},None,"api/src/legacy_soap_api/legacy_soap_api_utils.py get_auth_error_response; body asserted by api/tests/src/legacy_soap_api/test_legacy_soap_api_utils.py lines 30-42", placeholders="")
run("update-application-info-success-false","get_soap_proxy_failed_to_update_application_info",("GRANT80000008",),dict(headers={"Cookie":"JSESSIONID=xyz"}),None,
    "api/src/legacy_soap_api/legacy_soap_api_utils.py get_soap_proxy_failed_to_update_application_info (DEFAULT_NOT_FOUND_RESPONSES, UpdateApplicationInfoRequest)",
    placeholders="uuid.uuid4() = "+TEST_UUID+"; grants_gov_tracking_number = GRANT80000008")
# A success with an attachment, and a success list, from the client tests.
C="api/tests/src/legacy_soap_api/test_legacy_soap_api_client.py"
ns.update(submission=types.SimpleNamespace(legacy_tracking_number=80000008, application_submission_id="11111111-2222-3333-4444-555555555555"), submission_text="PK-zip-bytes")
body,(a,b)=block(C,467)
write("get-application-zip-with-attachment", body, 200, MTOM_CT.format(b="cccccccc-1111-2222-3333-dddddddddddd"), f"{C} lines {a}-{b}", "the test's expected response body, evaluated byte for byte",
      "submission.application_submission_id = 11111111-2222-3333-4444-555555555555, submission_text (the zip file's bytes) = PK-zip-bytes, submission.legacy_tracking_number = 80000008")
