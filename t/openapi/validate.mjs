// The OpenAPI check of t/63-openapi.t, run with node from the directory
// the validator is installed in (the test copies it there).
//
//   node validate.mjs DOCUMENT [ANSWERS]
//
// Validates DOCUMENT (JSON) with @seriousme/openapi-schema-validator,
// which checks it against the OpenAPI 3.1 schema and resolves its $refs.
// ANSWERS, when given, is a JSON array of {name, pointer, body}: each
// body is validated (JSON Schema 2020-12, Ajv) against the schema at
// pointer, a JSON pointer into the document, strictly: an object schema
// that does not say what other members it allows allows none
// (unevaluatedProperties: false), so that a member the document does not
// describe fails as a missing required one or a wrong null does. Prints
// a JSON report.

import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const [docFile, answersFile] = process.argv.slice(2);
const doc = JSON.parse(readFileSync(docFile, "utf8"));

const validator = new Validator();
const result = await validator.validate(structuredClone(doc));

const report = {
    valid: result.valid,
    version: validator.version,
    errors: result.errors || [],
    answers: [],
};

if (answersFile) {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    const id = "https://platform.invalid/openapi.json";
    ajv.addSchema({ ...closed(structuredClone(doc)), $id: id });

    for (const a of JSON.parse(readFileSync(answersFile, "utf8"))) {
        const check = ajv.compile({ $ref: id + "#" + a.pointer });
        const ok = check(a.body);
        report.answers.push({ name: a.name, valid: ok,
                              errors: ok ? [] : check.errors });
    }
}

console.log(JSON.stringify(report));

// every object schema with properties and no word on other members: none
function closed(node) {
    if (Array.isArray(node)) {
        node.forEach(closed);
    } else if (node && typeof node === "object") {
        const type = [].concat(node.type);
        if (type.includes("object") && node.properties
            && !("additionalProperties" in node)
            && !("unevaluatedProperties" in node))
        {
            node.unevaluatedProperties = false;
        }
        Object.values(node).forEach(closed);
    }
    return node;
}
