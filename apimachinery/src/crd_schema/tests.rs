use super::*;
use serde_json::json;

fn crontab_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["cronSpec"],
                "properties": {
                    "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                    "image": {"type": "string", "maxLength": 20},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "weight": {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": true, "maximum": 100},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string"},
                                "port": {"type": "integer", "format": "int32", "default": 80}
                            }
                        }
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}, "maxItems": 3},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2},
                    "size": {"x-kubernetes-int-or-string": true},
                    "template": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": true,
                        "x-kubernetes-preserve-unknown-fields": true
                    },
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "when": {"type": "string", "format": "date-time"},
                    "nested": {
                        "type": "object",
                        "default": {},
                        "properties": {
                            "a": {"type": "string", "default": "x"},
                            "maybe": {"type": "string", "nullable": true},
                            "inner": {"type": "object", "properties": {"b": {"type": "integer", "default": 2}}}
                        }
                    }
                }
            },
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
        }
    })
}

fn crontab() -> Schema {
    Schema::compile(&crontab_schema()).expect("crontab schema compiles")
}

fn valid_obj() -> Value {
    json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "my-cron"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-cron-image", "replicas": 3}
    })
}

fn strs(errs: &[FieldError]) -> Vec<String> {
    let mut v: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    v.sort();
    v
}

fn sorted(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

fn with_spec(field: &str, val: Value) -> Value {
    let mut o = valid_obj();
    o["spec"][field] = val;
    o
}

#[test]
fn crontab_valid() {
    let s = crontab();
    assert!(s.validate(&valid_obj()).is_empty());
    let mut o = valid_obj();
    o["spec"]["ports"] = json!([{"name": "a", "port": 1}, {"name": "b"}]);
    o["spec"]["tags"] = json!(["x", "y"]);
    o["spec"]["size"] = json!("50%");
    o["spec"]["weight"] = json!(2.5);
    o["spec"]["when"] = json!("2024-02-29T10:00:00Z");
    o["spec"]["template"] =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {}});
    o["status"] = json!({"replicas": 2});
    assert_eq!(strs(&s.validate(&o)), Vec::<String>::new());
}

#[test]
fn crontab_invalid_table() {
    let s = crontab();
    let cron_pat = "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$";
    let cases: Vec<(Value, Vec<String>)> = vec![
        (
            with_spec("replicas", json!("abc")),
            sorted(&[
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            ]),
        ),
        (
            with_spec("replicas", json!(0)),
            sorted(&[
                "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            ]),
        ),
        (
            with_spec("replicas", json!(11)),
            sorted(&[
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
            ]),
        ),
        (
            with_spec("replicas", json!(1.5)),
            sorted(&[
                r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#,
                r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.replicas"#,
            ]),
        ),
        // an integral float is an integer
        (with_spec("replicas", json!(2.0)), vec![]),
        (
            with_spec("cronSpec", json!("bad")),
            vec![format!(
                "spec.cronSpec: Invalid value: \"bad\": spec.cronSpec in body should match '{cron_pat}'"
            )],
        ),
        (
            {
                let mut o = valid_obj();
                o["spec"].as_object_mut().unwrap().remove("cronSpec");
                o
            },
            sorted(&["spec.cronSpec: Required value"]),
        ),
        (
            with_spec("image", json!("a-very-long-image-name-indeed")),
            sorted(&["spec.image: Too long: may not be more than 20 bytes"]),
        ),
        (
            with_spec("mode", json!("x")),
            sorted(&[r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#]),
        ),
        (
            with_spec("weight", json!(100.0)),
            sorted(&[
                "spec.weight: Invalid value: 100: spec.weight in body should be less than 100",
            ]),
        ),
        // upstream quirk: an int64 value checks multipleOf with int64(0.5) == 0
        (
            with_spec("weight", json!(3)),
            sorted(&[
                "spec.weight: Invalid value: 0: factor MultipleOf declared for spec.weight must be positive: 0",
            ]),
        ),
        (
            with_spec("weight", json!(0.3)),
            sorted(&[
                "spec.weight: Invalid value: 0.3: spec.weight in body should be a multiple of 0.5",
            ]),
        ),
        (
            with_spec(
                "ports",
                json!([{"name": "a"}, {"name": "b"}, {"name": "a", "port": 2}]),
            ),
            sorted(&[r#"spec.ports[2]: Duplicate value: {"name":"a"}"#]),
        ),
        (
            with_spec("ports", json!([{"port": 1}])),
            sorted(&["spec.ports[0].name: Required value"]),
        ),
        (
            with_spec("ports", json!([{"name": "a", "port": 2147483648i64}])),
            sorted(&[
                r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.ports[0].port"#,
            ]),
        ),
        (
            with_spec("ports", json!(["x"])),
            sorted(&[
                r#"spec.ports[0]: Invalid value: "string": spec.ports[0] in body must be of type object: "string""#,
                r#"spec.ports[0]: Invalid value: "x": must be an object for an array of list-type map"#,
            ]),
        ),
        (
            with_spec("tags", json!(["x", "y", "x"])),
            sorted(&[r#"spec.tags[2]: Duplicate value: "x""#]),
        ),
        (
            with_spec("tags", json!(["a", "b", "c", "d"])),
            sorted(&["spec.tags: Too many: 4: must have at most 3 items"]),
        ),
        (
            with_spec("labels", json!({"a": 1})),
            sorted(&[
                r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
            ]),
        ),
        (
            with_spec("labels", json!({"a": "1", "b": "2", "c": "3"})),
            sorted(&["spec.labels: Too many: 3: must have at most 2 items"]),
        ),
        (
            with_spec("size", json!(true)),
            sorted(&[
                r#"spec.size: Invalid value: "boolean": spec.size in body must be of type integer,string: "boolean""#,
            ]),
        ),
        (with_spec("size", json!(5)), vec![]),
        (
            with_spec("when", json!("2024-02-30T10:00:00Z")),
            sorted(&[
                r#"spec.when: Invalid value: "2024-02-30T10:00:00Z": spec.when in body must be of type date-time: "2024-02-30T10:00:00Z""#,
            ]),
        ),
        (
            with_spec("template", json!({"spec": {}})),
            sorted(&[
                "spec.template.apiVersion: Required value",
                "spec.template.kind: Required value",
            ]),
        ),
        (
            with_spec(
                "template",
                json!({"apiVersion": "a/b/c", "kind": "my_kind", "metadata": {"name": "a/b"}}),
            ),
            sorted(&[
                r#"spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
                r#"spec.template.kind: Invalid value: "my_kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
                r#"spec.template.metadata.name: Invalid value: "a/b": may not contain '/'"#,
            ]),
        ),
        (
            with_spec(
                "template",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"a b": "c"}}}),
            ),
            sorted(&[
                r#"spec.template.metadata.labels: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
            ]),
        ),
        (
            with_spec("nested", Value::Null),
            sorted(&[
                r#"spec.nested: Invalid value: "null": spec.nested in body must be of type object: "null""#,
            ]),
        ),
        (with_spec("nested", json!({"maybe": null})), vec![]),
        (
            json!({"spec": "x"}),
            sorted(&[
                r#"spec: Invalid value: "string": spec in body must be of type object: "string""#,
            ]),
        ),
    ];
    for (i, (obj, want)) in cases.iter().enumerate() {
        assert_eq!(&strs(&s.validate(obj)), want, "case {i}: {obj}");
    }
}

#[test]
fn field_error_shape() {
    let s = crontab();
    let errs = s.validate(&with_spec("replicas", json!("abc")));
    assert_eq!(errs.len(), 1);
    let e = &errs[0];
    assert_eq!(e.field, "spec.replicas");
    assert_eq!(e.kind, ErrorKind::TypeInvalid);
    assert_eq!(e.kind.reason(), "FieldValueTypeInvalid");
    assert_eq!(
        e.message,
        r#"Invalid value: "string": spec.replicas in body must be of type integer: "string""#
    );
    assert_eq!(
        e.detail,
        r#"spec.replicas in body must be of type integer: "string""#
    );
    let errs = s.validate(&with_spec("mode", json!(3)));
    let ns: Vec<_> = errs
        .iter()
        .filter(|e| e.kind == ErrorKind::NotSupported)
        .collect();
    assert_eq!(
        ns[0].message,
        r#"Unsupported value: 3: supported values: "a", "b""#
    );
}

#[test]
fn status_subresource_validation() {
    let s = crontab();
    let o = json!({"spec": {"cronSpec": "x"}, "status": {"replicas": "two"}});
    assert_eq!(
        strs(&s.validate_status(&o)),
        sorted(&[
            r#"status.replicas: Invalid value: "string": replicas in body must be of type integer: "string""#
        ])
    );
    assert!(s.has_property(&["status"]));
    assert!(s.has_property(&["spec", "replicas"]));
    assert!(!s.has_property(&["spec", "nope"]));
    assert_eq!(s.property_type(&["spec", "replicas"]), Some("integer"));
    assert!(s.has_property(&["spec", "labels", "anything"]));
}

// Cases mirroring upstream's apiserver/validation tests (exact error strings).
#[test]
fn upstream_value_validation_table() {
    type ObjCases = Vec<(Value, Vec<&'static str>)>;
    let cases: Vec<(Value, ObjCases)> = vec![
        (
            json!({"type": "object", "properties": {"field": {"type": "object", "nullable": false}}}),
            vec![
                (
                    json!({"field": "foo"}),
                    vec![
                        r#"field: Invalid value: "string": field in body must be of type object: "string""#,
                    ],
                ),
                (
                    json!({"field": 42}),
                    vec![
                        r#"field: Invalid value: "integer": field in body must be of type object: "integer""#,
                    ],
                ),
                (
                    json!({"field": true}),
                    vec![
                        r#"field: Invalid value: "boolean": field in body must be of type object: "boolean""#,
                    ],
                ),
                (
                    json!({"field": 1.2}),
                    vec![
                        r#"field: Invalid value: "number": field in body must be of type object: "number""#,
                    ],
                ),
                (
                    json!({"field": []}),
                    vec![
                        r#"field: Invalid value: "array": field in body must be of type object: "array""#,
                    ],
                ),
                (
                    json!({"field": null}),
                    vec![
                        r#"field: Invalid value: "null": field in body must be of type object: "null""#,
                    ],
                ),
                (json!({"field": {}}), vec![]),
            ],
        ),
        (
            json!({"type": "object", "properties": {"field": {"nullable": true, "x-kubernetes-preserve-unknown-fields": true}}}),
            vec![
                (json!({"field": null}), vec![]),
                (json!({"field": 1.2}), vec![]),
                (json!({"field": []}), vec![]),
            ],
        ),
        (
            json!({"type": "object", "properties": {"field": {"x-kubernetes-int-or-string": true}}}),
            vec![
                (json!({"field": 42}), vec![]),
                (json!({"field": "foo"}), vec![]),
                (
                    json!({"field": null}),
                    vec![
                        r#"field: Invalid value: "null": field in body must be of type integer,string: "null""#,
                    ],
                ),
                (
                    json!({"field": 1.2}),
                    vec![
                        r#"field: Invalid value: "number": field in body must be of type integer,string: "number""#,
                    ],
                ),
                (
                    json!({"field": {}}),
                    vec![
                        r#"field: Invalid value: "object": field in body must be of type integer,string: "object""#,
                    ],
                ),
            ],
        ),
        (
            json!({"type": "object", "properties": {"field": {"nullable": true, "x-kubernetes-int-or-string": true,
                "anyOf": [{"type": "integer"}, {"type": "string"}]}}}),
            vec![
                (json!({"field": null}), vec![]),
                (json!({"field": 42}), vec![]),
                (
                    json!({"field": true}),
                    vec![
                        r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
                        r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#,
                        r#"field: Invalid value: "boolean": field in body must be of type integer: "boolean""#,
                    ],
                ),
                (
                    json!({"field": 1.2}),
                    vec![
                        r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
                        r#"field: Invalid value: "number": field in body must be of type integer,string: "number""#,
                        r#"field: Invalid value: "number": field in body must be of type integer: "number""#,
                        r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in field"#,
                    ],
                ),
            ],
        ),
        (
            json!({"type": "object", "properties": {"field": {"nullable": true, "x-kubernetes-int-or-string": true,
                "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]}}}),
            vec![(
                json!({"field": {}}),
                vec![
                    r#"<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated"#,
                    r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
                    r#"field: Invalid value: "object": field in body must be of type integer,string: "object""#,
                    r#"field: Invalid value: "object": field in body must be of type integer: "object""#,
                ],
            )],
        ),
        (
            json!({"type": "object", "required": ["field"], "properties": {"field": {"type": "object",
                "required": ["nested"], "properties": {"nested": {"x-kubernetes-preserve-unknown-fields": true}}}}}),
            vec![
                (json!({"test": "a"}), vec!["field: Required value"]),
                (json!({"field": {}}), vec!["field.nested: Required value"]),
            ],
        ),
        (
            json!({"type": "object", "properties": {"field": {"type": "object", "required": ["nestedint", "nestedstring"],
                "properties": {"nestedint": {"type": "integer", "enum": [1, 2]}, "nestedstring": {"type": "string", "enum": ["a", "b"]}}}}}),
            vec![
                (
                    json!({"field": {}}),
                    vec![
                        "field.nestedint: Required value",
                        "field.nestedstring: Required value",
                    ],
                ),
                (
                    json!({"field": {"nestedint": "x", "nestedstring": true}}),
                    vec![
                        r#"field.nestedint: Invalid value: "string": field.nestedint in body must be of type integer: "string""#,
                        r#"field.nestedint: Unsupported value: "x": supported values: "1", "2""#,
                        r#"field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type string: "boolean""#,
                        r#"field.nestedstring: Unsupported value: true: supported values: "a", "b""#,
                    ],
                ),
            ],
        ),
        (
            json!({"type": "object", "properties": {"fieldX": {"type": "string", "format": "k8s-long-name"}, "fieldY": {"type": "string", "format": "k8s-short-name"}}}),
            vec![
                (
                    json!({"fieldX": "a.-"}),
                    vec![
                        r#"fieldX: Invalid value: "a.-": fieldX in body must be of type k8s-long-name: "a.-""#,
                    ],
                ),
                (
                    json!({"fieldY": "a-"}),
                    vec![
                        r#"fieldY: Invalid value: "a-": fieldY in body must be of type k8s-short-name: "a-""#,
                    ],
                ),
                (json!({"fieldX": "a.b", "fieldY": "a-b"}), vec![]),
            ],
        ),
        (
            json!({"type": "object", "properties": {
                "intThirtyTwo": {"type": "integer", "format": "int32"},
                "intSixtyFour": {"type": "integer", "format": "int64"},
                "floatThreeTwo": {"type": "number", "format": "float"},
                "floatSixFour": {"type": "number", "format": "double"}}}),
            vec![
                (
                    json!({"intThirtyTwo": -2147483648i64, "intSixtyFour": i64::MIN, "floatThreeTwo": -(f32::MAX as f64), "floatSixFour": -f64::MAX}),
                    vec![],
                ),
                (
                    json!({"intThirtyTwo": 2147483648i64}),
                    vec![
                        r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in intThirtyTwo"#,
                    ],
                ),
                (
                    json!({"intSixtyFour": (i64::MAX as f64) * 1.1}),
                    vec![
                        r#"intSixtyFour: Invalid value: "float64": intSixtyFour in body must be of type int64: "float64""#,
                        r#"<nil>: Invalid value: "": Checked value must be of type integer with format int64 in intSixtyFour"#,
                    ],
                ),
                (
                    json!({"floatThreeTwo": (f32::MAX as f64) * 1.1}),
                    vec![
                        r#"<nil>: Invalid value: "": Checked value must be of type number with format float in floatThreeTwo"#,
                    ],
                ),
            ],
        ),
        (
            json!({"type": "object", "properties": {"s": {"type": "string", "minLength": 2}, "a": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "o": {"type": "object", "minProperties": 1}, "f": {"type": "object", "additionalProperties": false}}}),
            vec![(
                json!({"s": "a", "a": [], "o": {}}),
                vec![
                    r#"s: Invalid value: "a": s in body should be at least 2 chars long"#,
                    "a: Invalid value: 0: a in body should have at least 1 items",
                    "o: Invalid value: 0: o in body should have at least 1 properties",
                ],
            )],
        ),
    ];
    for (ci, (schema, objs)) in cases.iter().enumerate() {
        let s = Schema::compile(schema).unwrap_or_else(|e| panic!("case {ci}: {:?}", strs(&e)));
        for (oi, (obj, want)) in objs.iter().enumerate() {
            assert_eq!(
                strs(&s.validate(obj)),
                sorted(want),
                "case {ci}/{oi}: {obj}"
            );
        }
    }
}

#[test]
fn oneof_and_not_messages() {
    let s = Schema::compile(
        &json!({"type": "object", "properties": {"f": {"type": "string",
        "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}], "not": {"enum": ["zz"]}}}}),
    )
    .unwrap();
    assert!(s.validate(&json!({"f": "ax"})).is_empty());
    assert_eq!(
        strs(&s.validate(&json!({"f": "ab"}))),
        sorted(&[
            r#"<nil>: Invalid value: "": "f" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ])
    );
    let got = strs(&s.validate(&json!({"f": "zz"})));
    assert!(
        got.contains(
            &r#"<nil>: Invalid value: "": "f" must not validate the schema (not)"#.to_string()
        ),
        "{got:?}"
    );
    assert!(got.contains(&r#"<nil>: Invalid value: "": "f" must validate one and only one schema (oneOf). Found none valid"#.to_string()), "{got:?}");
}

#[test]
fn metadata_name_restrictions() {
    let s = Schema::compile(&json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}}}))
    .unwrap();
    assert!(
        s.validate(&json!({"metadata": {"name": "abc", "labels": {"x": "y"}}}))
            .is_empty()
    );
    assert_eq!(
        strs(&s.validate(&json!({"metadata": {"name": "abcdef"}}))),
        sorted(&["metadata.name: Too long: may not be more than 5 bytes"])
    );
}

// ---------------------------------------------------------------------------
// pruning
// ---------------------------------------------------------------------------

#[test]
fn pruning() {
    let s = crontab();
    let mut o = valid_obj();
    o["foo"] = json!(1);
    o["metadata"]["whatever"] = json!("kept");
    o["spec"]["bar"] = json!({"x": 1});
    o["spec"]["ports"] = json!([{"name": "a", "unknown": true}]);
    o["spec"]["labels"] = json!({"k": "v"});
    o["spec"]["extra"] = json!({"anything": {"goes": [1, 2]}});
    o["spec"]["template"] = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "bogus": 1, "creationTimestamp": null}, "spec": {"containers": []}});
    o["spec"]["nested"] = json!({"inner": {"b": 1, "c": 2}});
    o["status"] = json!({"replicas": 1, "conditions": []});
    let pruned = s.prune(&mut o);
    assert_eq!(
        pruned,
        vec![
            "foo",
            "spec.bar",
            "spec.nested.inner.c",
            "spec.ports[0].unknown",
            "spec.template.metadata.bogus",
            "status.conditions",
        ]
    );
    assert_eq!(
        o["metadata"],
        json!({"name": "my-cron", "whatever": "kept"})
    );
    assert_eq!(o["spec"]["extra"], json!({"anything": {"goes": [1, 2]}}));
    assert_eq!(o["spec"]["labels"], json!({"k": "v"}));
    assert_eq!(
        o["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}})
    );
    assert_eq!(o["spec"]["ports"], json!([{"name": "a"}]));
    assert!(o.get("foo").is_none());
}

#[test]
fn pruning_preserve_unknown_switches_back() {
    let s = Schema::compile(
        &json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
    )
    .unwrap();
    let mut o = json!({"kind": "X", "random": {"deep": 1}, "spec": {"a": "x", "b": "y"}});
    assert_eq!(s.prune(&mut o), vec!["spec.b"]);
    assert_eq!(
        o,
        json!({"kind": "X", "random": {"deep": 1}, "spec": {"a": "x"}})
    );
    assert!(s.preserves_unknown_fields(&[]));
}

#[test]
fn pruning_nested_unknown_objects_in_arrays() {
    let s = Schema::compile(&json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}}}}}))
    .unwrap();
    let mut o = json!({"spec": {"list": [[{"k": "a", "z": 1}], [{"y": {"q": 1}}]]}});
    assert_eq!(
        s.prune(&mut o),
        vec!["spec.list[0][0].z", "spec.list[1][0].y"]
    );
    assert_eq!(o, json!({"spec": {"list": [[{"k": "a"}], [{}]]}}));
}

// ---------------------------------------------------------------------------
// defaulting
// ---------------------------------------------------------------------------

#[test]
fn defaulting() {
    let s = crontab();
    // spec exists: replicas and nested (with its own nested defaults) applied
    let mut o = json!({"spec": {"cronSpec": "* * * * *", "ports": [{"name": "a"}, {"name": "b", "port": 8080}]}});
    s.default(&mut o);
    assert_eq!(o["spec"]["replicas"], json!(1));
    assert_eq!(o["spec"]["nested"], json!({"a": "x"}));
    assert_eq!(
        o["spec"]["ports"],
        json!([{"name": "a", "port": 80}, {"name": "b", "port": 8080}])
    );
    // the parent does not exist: no defaults below it
    let mut o = json!({"metadata": {"name": "x"}});
    s.default(&mut o);
    assert_eq!(o, json!({"metadata": {"name": "x"}}));
    // nested objects that exist get their defaults
    let mut o = json!({"spec": {"nested": {"inner": {}}}});
    s.default(&mut o);
    assert_eq!(o["spec"]["nested"], json!({"a": "x", "inner": {"b": 2}}));
    // non-nullable null with default -> default; without default -> dropped; nullable -> kept
    let mut o = json!({"spec": {"replicas": null, "image": null, "nested": {"maybe": null}}});
    s.default(&mut o);
    assert_eq!(o["spec"]["replicas"], json!(1));
    assert!(o["spec"].get("image").is_none());
    assert_eq!(o["spec"]["nested"]["maybe"], Value::Null);
    // prune + default
    let mut o = json!({"spec": {"bogus": 1}});
    assert_eq!(s.prune_and_default(&mut o), vec!["spec.bogus"]);
    assert_eq!(o, json!({"spec": {"replicas": 1, "nested": {"a": "x"}}}));
}

#[test]
fn defaulting_additional_properties_and_items() {
    let s = Schema::compile(&json!({"type": "object", "properties": {
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "integer", "default": 7}}}},
        "l": {"type": "array", "items": {"type": "string", "default": "d"}}}}))
    .unwrap();
    let mut o = json!({"m": {"a": {}, "b": {"x": 1}}, "l": ["q", null]});
    s.default(&mut o);
    assert_eq!(
        o,
        json!({"m": {"a": {"x": 7}, "b": {"x": 1}}, "l": ["q", "d"]})
    );
}

// ---------------------------------------------------------------------------
// compile: structural schema and CRD schema rules
// ---------------------------------------------------------------------------

fn compile_errs(schema: Value) -> Vec<String> {
    match Schema::compile_at(&schema, "spec.versions[0].schema.openAPIV3Schema") {
        Ok(_) => vec![],
        Err(e) => strs(&e),
    }
}

#[test]
fn compile_rejects_non_structural() {
    let p = "spec.versions[0].schema.openAPIV3Schema";
    let cases: Vec<(Value, Vec<String>)> = vec![
        (
            json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
            vec![format!(
                "{p}.properties[spec].type: Required value: must not be empty for specified object fields"
            )],
        ),
        (
            json!({"properties": {"spec": {"type": "object"}}}),
            vec![format!(
                "{p}.type: Required value: must not be empty at the root"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array"}}}),
            vec![format!(
                "{p}.properties[a].items: Required value: must be specified"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {}}}}),
            vec![format!(
                "{p}.properties[a].items.type: Required value: must not be empty for specified array items"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "string"}, {"pattern": "x", "description": "d"}]}}}),
            vec![
                format!(
                    "{p}.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"
                ),
                format!(
                    "{p}.properties[a].anyOf[1].description: Forbidden: must be empty to be structural"
                ),
            ],
        ),
        (
            json!({"type": "object", "anyOf": [{"properties": {"foo": {"pattern": "x"}}}]}),
            vec![format!(
                "{p}.properties[foo]: Required value: because it is defined in {p}.anyOf[0].properties[foo]"
            )],
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            vec![format!(
                "{p}.additionalProperties: Forbidden: must not be used at the root"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"x": {"type": "string"}},
                "additionalProperties": {"type": "string"}}}}),
            vec![format!(
                "{p}.properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
            )],
        ),
        (
            json!({"type": "string"}),
            vec![format!(
                r#"{p}.type: Invalid value: "string": must be object at the root"#
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "foo"}}}),
            vec![format!(
                r#"{p}.properties[a].type: Unsupported value: "foo": supported values: "array", "boolean", "integer", "number", "object", "string""#
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}),
            vec![format!(
                "{p}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/definitions/x"}}}),
            // NewStructural fails, so the structural invariants are not reported
            vec![format!(
                "{p}.properties[a].$ref: Forbidden: $ref is not supported"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}),
            vec![format!(
                "{p}.properties[a].items: Forbidden: items must be a schema object and not an array"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "+"}}}),
            vec![format!(
                "{p}.properties[a].pattern: Invalid value: \"+\": must be a valid regular expression, but isn't: error parsing regexp: missing argument to repetition operator: `+`"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1, "default": 0}}}),
            vec![format!(
                "{p}.properties[a].default: Invalid value: 0:  in body should be greater than or equal to 1"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"x": {"type": "string"}}, "default": {"x": "1", "y": 2}}}}),
            vec![format!(
                r#"{p}.properties[a].default: Invalid value: {{"x":"1","y":2}}: must not have unknown fields"#
            )],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
            vec![format!(
                "{p}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            )],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}}),
            vec![format!(
                "{p}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}}),
            vec![format!(
                "{p}.properties[a].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "z"],
                "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}}),
            vec![
                format!(
                    r#"{p}.properties[a].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"#
                ),
                format!(
                    r#"{p}.properties[a].x-kubernetes-list-map-keys: Invalid value: ["k","z"]: entries must all be names of item properties"#
                ),
            ],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-list-type": "bag"}}}),
            vec![
                format!(
                    r#"{p}.properties[a].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified"#
                ),
                format!(
                    r#"{p}.properties[a].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#
                ),
            ],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "x-kubernetes-embedded-resource": true}}}),
            vec![format!(
                "{p}.properties[a].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}}}),
            vec![format!(
                "{p}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
            )],
        ),
        (
            json!({"type": "object", "nullable": true}),
            vec![format!(
                "{p}.nullable: Forbidden: nullable cannot be true at the root"
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-validations": [{"rule": " "}]}}}),
            vec![format!(
                "{p}.properties[a].x-kubernetes-validations[0].rule: Required value: rule is not specified"
            )],
        ),
    ];
    for (i, (schema, want)) in cases.iter().enumerate() {
        assert_eq!(&compile_errs(schema.clone()), want, "case {i}: {schema}");
    }
}

#[test]
fn compile_accepts_int_or_string_patterns_and_records_cel() {
    let schema = json!({"type": "object", "properties": {
        "a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "b": {"x-kubernetes-int-or-string": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+%?$"}]},
        "spec": {"type": "object", "x-kubernetes-validations": [{"rule": "self.x > 0", "message": "x must be positive"}],
            "properties": {"x": {"type": "integer"}}}
    }});
    let s = Schema::compile(&schema).unwrap_or_else(|e| panic!("{:?}", strs(&e)));
    assert_eq!(s.cel_rules().len(), 1);
    let r = &s.cel_rules()[0];
    assert_eq!(r.rule, "self.x > 0");
    assert_eq!(r.message.as_deref(), Some("x must be positive"));
    assert_eq!(r.data_path, "spec");
    assert_eq!(
        r.schema_path,
        "openAPIV3Schema.properties[spec].x-kubernetes-validations[0]"
    );
    assert!(s.validate(&json!({"b": "50%"})).is_empty());
    assert_eq!(
        strs(&s.validate(&json!({"b": "x"}))),
        sorted(&[
            r#"<nil>: Invalid value: "": "b" must validate all the schemas (allOf)"#,
            r#"b: Invalid value: "x": b in body should match '^[0-9]+%?$'"#,
        ])
    );
}

#[test]
fn compile_status_subresource_root_restriction() {
    let opts = CompileOptions {
        field_path: "spec.versions[0].schema.openAPIV3Schema".into(),
        status_subresource: true,
    };
    let err = Schema::compile_with(
        &json!({"type": "object", "anyOf": [{"required": ["spec"]}],
        "properties": {"spec": {"type": "object"}}}),
        &opts,
    )
    .unwrap_err();
    assert_eq!(err.len(), 1);
    assert!(err[0].message.ends_with(
        "fields are allowed at the root of the schema if the status subresource is enabled"
    ));
    assert!(Schema::compile_with(&crontab_schema(), &opts).is_ok());
}

#[test]
fn deep_nesting_rejected() {
    let mut s = json!({"type": "string"});
    for _ in 0..150 {
        s = json!({"type": "object", "properties": {"a": s}});
    }
    let errs = Schema::compile(&s).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].kind, ErrorKind::Forbidden);
    assert!(
        errs[0]
            .message
            .contains("must not be nested deeper than 100 levels")
    );

    // a deep object against a permissive schema: no stack overflow, bounded work
    let schema =
        Schema::compile(&json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}))
            .unwrap();
    let mut o = json!(1);
    for _ in 0..5000 {
        o = Value::Array(vec![o]);
    }
    let mut m = serde_json::Map::new();
    m.insert("a".into(), o);
    let mut obj = Value::Object(m);
    let _ = schema.prune(&mut obj);
    schema.default(&mut obj);
    let _ = schema.validate(&obj);
    let _ = schema.validate_update(&obj, &obj);
    let _ = gofmt::json(&obj);
    // dropping the deep value recursively is serde_json's business; leak-free but avoid stack use
    std::mem::forget(obj);
}

#[test]
fn hostile_pattern_rejected() {
    let errs = compile_errs(
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "((((a{1000}){1000}){1000}){1000})"}}}),
    );
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].contains("must be a valid regular expression, but isn't: error parsing regexp"),
        "{errs:?}"
    );
}

// ---------------------------------------------------------------------------
// formats and Go printing
// ---------------------------------------------------------------------------

#[test]
fn formats() {
    let ok = [
        ("date", "2024-02-29"),
        ("date-time", "2024-01-01T00:00:00Z"),
        ("date-time", "2024-01-01t00:00:00.123+02:00"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
        ("ipv4", "10.0.0.1"),
        ("ipv4", "010.0.0.1"),
        ("ipv6", "::1"),
        ("ipv6", "2001:db8::ff00:42:8329"),
        ("cidr", "10.0.0.0/8"),
        ("cidr", "fd00::/64"),
        ("hostname", "my-host.example.com"),
        ("email", "a.b@example.com"),
        ("email", "John Doe <j@example.com>"),
        ("uri", "https://example.com/a?b=c"),
        ("uri", "/relative/path"),
        ("mac", "01:23:45:67:89:ab"),
        ("byte", "aGVsbG8="),
        ("duration", "1h30m"),
        ("duration", "3 days"),
        ("hexcolor", "#fff"),
        ("rgbcolor", "rgb(1, 2, 255)"),
        ("isbn10", "0321751043"),
        ("isbn13", "978-0321751041"),
        ("ssn", "123-45-6789"),
        ("bsonobjectid", "507f1f77bcf86cd799439011"),
        ("creditcard", "4111 1111 1111 1111"),
    ];
    for (f, v) in ok {
        assert!(format::validates(f, v), "{f} should accept {v}");
    }
    let bad = [
        ("date", "2023-02-29"),
        ("date", "2024-1-01"),
        ("date-time", "2024-01-01T24:00:00Z"),
        ("date-time", "2024-01-01"),
        ("uuid", "123"),
        ("ipv4", "::1"),
        ("ipv4", "256.0.0.1"),
        ("ipv6", "1.2.3.4"),
        ("ipv6", "1::2::3"),
        ("cidr", "10.0.0.0/33"),
        ("hostname", "-bad-"),
        ("email", "nope"),
        ("uri", "relative"),
        ("uri", ""),
        ("mac", "01:23:45"),
        ("byte", "abc"),
        ("duration", "forever"),
        ("isbn10", "0321751044"),
        ("creditcard", "4111 1111 1111 1112"),
    ];
    for (f, v) in bad {
        assert!(!format::validates(f, v), "{f} should reject {v}");
    }
    // unknown formats are ignored; numeric formats only apply to their type
    let s = Schema::compile(&json!({"type": "object", "properties": {
        "a": {"type": "string", "format": "not-a-format"}, "b": {"type": "string", "format": "int32"}}}))
    .unwrap();
    assert!(s.validate(&json!({"a": "zzz", "b": "zzz"})).is_empty());
}

#[test]
fn go_printing() {
    assert_eq!(gofmt::float_v(1.5), "1.5");
    assert_eq!(gofmt::float_v(10.0), "10");
    assert_eq!(gofmt::float_v(100000.0), "100000");
    assert_eq!(gofmt::float_v(1000000.0), "1e+06");
    assert_eq!(gofmt::float_v(1234567.0), "1.234567e+06");
    assert_eq!(gofmt::float_v(0.0001), "0.0001");
    assert_eq!(gofmt::float_v(0.00001), "1e-05");
    assert_eq!(gofmt::float_v(-2.5e-7), "-2.5e-07");
    assert_eq!(gofmt::float_f(1e21), "1000000000000000000000");
    assert_eq!(gofmt::float_f(0.5), "0.5");
    assert_eq!(
        gofmt::json(&json!({"b": 1.0, "a": "<&>", "c": [1e21, 1e-7, 2.5]})),
        r#"{"a":"\u003c\u0026\u003e","b":1,"c":[1e+21,1e-7,2.5]}"#
    );
    assert_eq!(gofmt::quote("a\"b\\c\n\u{1}é"), r#""a\"b\\c\n\x01é""#);
    let e = FieldError::too_many("x", 3, 1);
    assert_eq!(e.to_string(), "x: Too many: 3: must have at most 1 item");
    let e = FieldError::required("spec.x", "");
    assert_eq!(e.to_string(), "spec.x: Required value");
}

#[test]
fn enum_go_conversions() {
    let s = Schema::compile(&json!({"type": "object", "properties": {
        "i": {"type": "integer", "enum": [1, 2]},
        "n": {"type": "number", "enum": [1.5]},
        "o": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "enum": [{"a": 1}]},
        "x": {"nullable": true, "x-kubernetes-preserve-unknown-fields": true, "enum": [null, "a"]}}}))
    .unwrap();
    assert!(
        s.validate(&json!({"i": 1, "n": 1.5, "o": {"a": 1}}))
            .is_empty()
    );
    assert_eq!(
        strs(&s.validate(&json!({"i": 3, "o": {"a": 1.5}}))),
        sorted(&[
            r#"i: Unsupported value: 3: supported values: "1", "2""#,
            r#"o: Unsupported value: {"a":1.5}: supported values: "{\"a\":1}""#,
        ])
    );
    // as upstream: null never matches an enum, even one listing null
    assert_eq!(
        strs(&s.validate(&json!({"x": null}))),
        sorted(&[r#"x: Unsupported value: null: supported values: "null", "a""#])
    );
}

// ---------------------------------------------------------------------------
// updates: ratcheting
// ---------------------------------------------------------------------------

#[test]
fn update_ratcheting() {
    let s = crontab();
    // an invalid value that was already stored is tolerated when unchanged
    let old = with_spec("image", json!("a-very-long-image-name-indeed"));
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(4);
    assert!(s.validate_update(&new, &old).is_empty());
    // ...but changing it (or adding a new invalid value) is validated
    new["spec"]["image"] = json!("another-very-long-image-name");
    assert_eq!(
        strs(&s.validate_update(&new, &old)),
        sorted(&["spec.image: Too long: may not be more than 20 bytes"])
    );
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(0);
    assert_eq!(
        strs(&s.validate_update(&new, &old)),
        sorted(&[
            "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"
        ])
    );
    // list-map items correlate by key, even when reordered
    let old = with_spec(
        "ports",
        json!([{"name": "a", "port": 2147483648i64}, {"name": "b"}]),
    );
    let new = with_spec(
        "ports",
        json!([{"name": "b"}, {"name": "a", "port": 2147483648i64}]),
    );
    assert!(s.validate_update(&new, &old).is_empty());
    // list-type uniqueness is only enforced when the old object satisfied it
    let old = with_spec("tags", json!(["x", "x"]));
    let mut new = old.clone();
    new["spec"]["image"] = json!("img");
    assert!(s.validate_update(&new, &old).is_empty());
    let old = valid_obj();
    assert_eq!(
        strs(&s.validate_update(&new, &old)),
        sorted(&[r#"spec.tags[1]: Duplicate value: "x""#])
    );
    // status subresource updates
    let old = json!({"spec": {}, "status": {"replicas": "two"}});
    assert!(s.validate_status_update(&old, &old).is_empty());
    let new = json!({"spec": {}, "status": {"replicas": "three"}});
    assert_eq!(
        strs(&s.validate_status_update(&new, &old)),
        sorted(&[
            r#"status.replicas: Invalid value: "string": replicas in body must be of type integer: "string""#
        ])
    );
}

#[test]
fn controller_gen_style_schema() {
    let qty = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
    let schema = json!({
        "description": "Widget is the Schema for the widgets API",
        "type": "object",
        "properties": {
            "apiVersion": {"description": "APIVersion defines...", "type": "string"},
            "kind": {"description": "Kind is...", "type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "limits": {
                        "type": "object",
                        "additionalProperties": {
                            "anyOf": [{"type": "integer"}, {"type": "string"}],
                            "pattern": qty,
                            "x-kubernetes-int-or-string": true
                        }
                    },
                    "containers": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string", "description": "n"},
                            "env": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}}
                        }}
                    },
                    "createdAt": {"type": "string", "format": "date-time"},
                    "args": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}}
                }
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }
    });
    let opts = CompileOptions {
        field_path: "spec.versions[0].schema.openAPIV3Schema".into(),
        status_subresource: true,
    };
    let s = Schema::compile_with(&schema, &opts).unwrap_or_else(|e| panic!("{:?}", strs(&e)));
    let ok = json!({"apiVersion": "x.io/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"limits": {"cpu": "500m", "memory": 128}, "containers": [{"name": "a", "env": {"K": "V"}}],
        "createdAt": "2024-01-01T00:00:00Z", "args": ["a", "a"]}, "status": {"anything": [1]}});
    assert_eq!(strs(&s.validate(&ok)), Vec::<String>::new());
    let bad = json!({"apiVersion": "x.io/v1", "kind": "Widget", "spec": {"limits": {"cpu": "lots"}, "args": "x"}});
    assert_eq!(
        strs(&s.validate(&bad)),
        sorted(&[
            &format!(
                r#"spec.limits.cpu: Invalid value: "lots": spec.limits.cpu in body should match '{qty}'"#
            ),
            r#"spec.args: Invalid value: "string": spec.args in body must be of type array: "string""#,
        ])
    );
}
