// A few uses of the types openapi-typescript generates from
// handlers/openapi.json (check.sh writes them to generated/), so that
// `tsc --strict` checks they describe the API usefully: required members
// are required, enums are closed, the webhook's body is typed.
import type { components, paths, webhooks } from "./generated/limbo-api";

type Registration = components["schemas"]["Registration"];
type Operation = components["schemas"]["Operation"];
type Problem = components["schemas"]["Problem"];

export const registration: Registration = {
  source_ref: "contract-583",
  logical_version: "v1",
  action: "create_folder",
  destination: "drive",
  risk: "compensable_write",
  payload: { name: "Contract 583" },
  after: { operation_id: "op_01J8Z6K2P3Q4R5S6T7V8W9X0YZ" },
};

// @ts-expect-error: a registration needs a destination.
export const incomplete: Registration = { source_ref: "c", logical_version: "v1", action: "a", payload: 1 };

// @ts-expect-error: "done" is not a state.
export const notAState: Operation["state"] = "done";

type Created = paths["/api/v1/operations"]["post"]["responses"][201]["content"]["application/json"];
type Refused = paths["/api/v1/operations"]["post"]["responses"][422]["content"]["application/problem+json"];

export function describe(op: Created): string {
  const attempts = op.attempts.map((a) => `${a.n}: ${a.result ?? "in flight"}`);
  return `${op.id} ${op.state} (${attempts.join(", ")})${op.resource ? " → " + op.resource.ref : ""}`;
}

export function mismatch(p: Refused): string | undefined {
  const problem: Problem = p;
  return problem.type === "payload-mismatch" ? problem.operation_id : undefined;
}

// A receiver of the decision webhook.
type DecisionEvent = webhooks["decision"]["post"]["requestBody"]["content"]["application/json"];
type Signed = webhooks["decision"]["post"]["parameters"]["header"];

export function onDecision(headers: Signed, event: DecisionEvent): string {
  const d = event.data;
  switch (event.type) {
    case "decision.confirm":
      return `${headers["webhook-id"]}: ${d.operation_id} confirmed with ${d.resource_ref ?? "?"}`;
    case "decision.compensate":
      return `${headers["webhook-id"]}: undo ${d.operation_id} by running ${d.compensation_operation_id ?? "?"}`;
    default:
      return `${headers["webhook-id"]}: ${d.operation_id} ${d.from_state} → ${d.to_state} at ${event.timestamp}`;
  }
}

export const sameShape: DecisionEvent["data"] extends components["schemas"]["Decision"] ? true : false = true;
