//! The fake API server's JSON patch (RFC 6902: add, remove, replace, test,
//! on RFC 6901 pointers) and strategic merge patch (lists with a merge key
//! merge by it, as `status.conditions` by `type`, with the `$patch: delete`
//! directive; other lists, `spec.taints` among them, are replaced whole,
//! as Kubernetes' NodeSpec declares no patch strategy for them).

use serde_json::Value;

/// The lists a strategic merge patch merges, and their merge key (the
/// Node's fields that declare `patchStrategy: merge`).
const MERGE_KEYS: &[(&str, &str)] = &[("conditions", "type"), ("addresses", "type")];

fn tokens(path: &str) -> Result<Vec<String>, String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("invalid JSON pointer {path:?}"));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// The parent of `path`'s last token, and that token.
fn parent<'a>(doc: &'a mut Value, path: &str) -> Result<(&'a mut Value, String), String> {
    let mut t = tokens(path)?;
    let last = t.pop().ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    let mut cur = doc;
    for k in &t {
        cur = match cur {
            Value::Object(m) => m.get_mut(k),
            Value::Array(a) => k.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("doc is missing path: {path:?}"))?;
    }
    Ok((cur, last))
}

fn index(a: &[Value], k: &str, path: &str, end_ok: bool) -> Result<usize, String> {
    let i: usize = k.parse().map_err(|_| format!("invalid index {k:?} in {path:?}"))?;
    if i < a.len() || (end_ok && i == a.len()) {
        Ok(i)
    } else {
        Err(format!("index out of bounds in {path:?}"))
    }
}

fn op(doc: &mut Value, o: &Value) -> Result<(), String> {
    let kind = o["op"].as_str().ok_or("an operation without op")?;
    let path = o["path"].as_str().ok_or("an operation without path")?;
    let value = o.get("value").cloned();
    let (p, last) = parent(doc, path)?;
    match (kind, p) {
        ("add", Value::Object(m)) => {
            m.insert(last, value.ok_or("add without value")?);
        }
        ("add", Value::Array(a)) => {
            let v = value.ok_or("add without value")?;
            if last == "-" {
                a.push(v);
            } else {
                let i = index(a, &last, path, true)?;
                a.insert(i, v);
            }
        }
        ("remove", Value::Object(m)) => {
            m.remove(&last)
                .ok_or_else(|| format!("unable to remove nonexistent key {path:?}"))?;
        }
        ("remove", Value::Array(a)) => {
            let i = index(a, &last, path, false)?;
            a.remove(i);
        }
        ("replace", Value::Object(m)) => {
            let slot = m.get_mut(&last).ok_or_else(|| format!("replace of missing {path:?}"))?;
            *slot = value.ok_or("replace without value")?;
        }
        ("replace", Value::Array(a)) => {
            let i = index(a, &last, path, false)?;
            a[i] = value.ok_or("replace without value")?;
        }
        ("test", p) => {
            let got = match p {
                Value::Object(m) => m.get(&last).cloned(),
                Value::Array(a) => index(a, &last, path, false).ok().map(|i| a[i].clone()),
                _ => None,
            };
            if got != value {
                return Err(format!("testing value {path:?} failed: test failed"));
            }
        }
        (k, _) => return Err(format!("unsupported operation {k:?} at {path:?}")),
    }
    Ok(())
}

/// Applies a JSON patch, all or nothing.
pub fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let ops = patch.as_array().ok_or("a JSON patch is a list of operations")?;
    let mut d = doc.clone();
    for o in ops {
        op(&mut d, o)?;
    }
    *doc = d;
    Ok(())
}

/// Applies a strategic merge patch.
pub fn strategic_merge(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(p) = patch else {
        *doc = patch.clone();
        return Ok(());
    };
    if !doc.is_object() {
        *doc = Value::Object(Default::default());
    }
    let t = doc.as_object_mut().expect("an object");
    for (k, v) in p {
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let key = MERGE_KEYS.iter().find(|(f, _)| f == k).map(|(_, m)| *m);
        match (key, v) {
            (Some(mk), Value::Array(items)) => {
                let list = t.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                let list = list.as_array_mut().ok_or_else(|| format!("{k} is not a list"))?;
                for item in items {
                    let id = item.get(mk).ok_or_else(|| format!("{k}: an item without {mk}"))?;
                    let at = list.iter().position(|x| x.get(mk) == Some(id));
                    match (item.get("$patch").and_then(Value::as_str), at) {
                        (Some("delete"), Some(i)) => {
                            list.remove(i);
                        }
                        (Some("delete"), None) => {}
                        (Some(d), _) => return Err(format!("unknown patch directive {d:?}")),
                        (None, Some(i)) => strategic_merge(&mut list[i], item)?,
                        (None, None) => list.push(item.clone()),
                    }
                }
            }
            _ => strategic_merge(t.entry(k.clone()).or_insert(Value::Null), v)?,
        }
    }
    Ok(())
}
