//! The plan table as a person reads it in a terminal: kubectl's short forms (the Kind alone
//! where no other kind of the plan has that name, `kind/name` references in WHY), and rows fitted
//! to the terminal's width so that none wraps. `-o wide` shows more columns (the kind's group,
//! the UID, the finalizers, what tracks it) and the reasons in full; `--all-rows` every row.

use std::collections::{BTreeSet, HashMap};

use crate::model::identity::ObjectId;
use crate::prune::execute::Target;
use crate::prune::teardown::PrunePlan;

/// Plans longer than this many rows show the first [`ROWS_PER_WAVE`] rows of each wave (every
/// row with `--all-rows`, and always in `--plan-out`).
pub const SCREENFUL: usize = 40;
/// The rows of each wave shown when a plan is longer than [`SCREENFUL`].
pub const ROWS_PER_WAVE: usize = 5;

/// The headers of the plan table.
pub const HEADERS: [&str; 5] = ["WAVE", "KIND", "NAMESPACE", "NAME", "WHY"];
/// The headers of the plan table with `-o wide`.
pub const WIDE_HEADERS: [&str; 8] = [
    "WAVE",
    "KIND",
    "NAMESPACE",
    "NAME",
    "UID",
    "FINALIZERS",
    "TRACKED-BY",
    "WHY",
];
/// Which columns give way, in this order and down to how many characters, when the table is
/// wider than the terminal: the reason first, then a long name (a CRD's), a long kind, a long
/// namespace, then each further.
pub const SHRINK: [(usize, usize); 8] = [(4, 16), (3, 24), (1, 14), (2, 12), (4, 8), (3, 12), (1, 8), (2, 9)];

/// How the plan table is shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct View {
    /// More columns, each kind with its group, the reasons in full (`-o wide`).
    pub wide: bool,
    /// Every row however long the plan (`--all-rows`).
    pub all_rows: bool,
}

/// Kubectl's short forms of the kinds and objects of one plan.
pub struct ShortNames {
    /// The groups each kind name has among the plan's objects and the objects its reasons name.
    groups: HashMap<String, BTreeSet<String>>,
    /// The namespaces of the plan's objects of each (kind, group, name): an object alone with its
    /// kind and name in the plan needs no namespace to be told apart.
    named: HashMap<(String, String, String), BTreeSet<Option<String>>>,
}

impl ShortNames {
    /// The short forms for these objects and the objects their reasons name.
    pub fn new<'a>(targets: impl IntoIterator<Item = &'a Target>) -> Self {
        let mut names = Self {
            groups: HashMap::new(),
            named: HashMap::new(),
        };
        for target in targets {
            let id = &target.id;
            names
                .named
                .entry((id.kind.clone(), id.group.clone(), id.name.clone()))
                .or_default()
                .insert(id.namespace.clone());
            names.know_kind(id);
            for (_, id) in references(&target.why) {
                names.know_kind(&id);
            }
        }
        names
    }

    fn know_kind(&mut self, id: &ObjectId) {
        self.groups.entry(id.kind.clone()).or_default().insert(id.group.clone());
    }

    fn ambiguous(&self, id: &ObjectId) -> bool {
        self.groups.get(&id.kind).is_some_and(|groups| groups.len() > 1)
    }

    /// The KIND column: the Kind alone, or `Kind.group` when another kind of that name (in
    /// another group) is in the plan.
    pub fn kind(&self, id: &ObjectId) -> String {
        if self.ambiguous(id) {
            id.kind_with_group()
        } else {
            id.kind.clone()
        }
    }

    /// An object named in a reason, as kubectl names a resource (`kustomization/usage`, with
    /// `.group` when the kind is ambiguous), then ` in NAMESPACE` unless it is the row's
    /// namespace or it is in the plan, alone there with its kind and name.
    pub fn reference(&self, id: &ObjectId, row_namespace: Option<&str>) -> String {
        let kind = id.kind.to_ascii_lowercase();
        let typed = if self.ambiguous(id) && !id.group.is_empty() {
            format!("{kind}.{}/{}", id.group, id.name)
        } else {
            format!("{kind}/{}", id.name)
        };
        let key = (id.kind.clone(), id.group.clone(), id.name.clone());
        let planned_alone = self
            .named
            .get(&key)
            .is_some_and(|namespaces| namespaces.len() == 1 && namespaces.contains(&id.namespace));
        match id.namespace.as_deref() {
            Some(namespace) if namespace != row_namespace.unwrap_or_default() && !planned_alone => {
                format!("{typed} in {namespace}")
            }
            _ => typed,
        }
    }

    /// A reason with every object it names in its short form.
    pub fn why(&self, why: &str, row_namespace: Option<&str>) -> String {
        let mut short = String::with_capacity(why.len());
        let mut last = 0;
        for (range, id) in references(why) {
            short.push_str(&why[last..range.start]);
            short.push_str(&self.reference(&id, row_namespace));
            last = range.end;
        }
        short.push_str(&why[last..]);
        short
    }
}

/// The objects a reason names (`Kind.group/namespace/name` or `Kind.group/name`, as
/// [`ObjectId`] displays them), each with where it is in the text.
fn references(why: &str) -> Vec<(std::ops::Range<usize>, ObjectId)> {
    let mut found = Vec::new();
    let mut offset = 0;
    for word in why.split(' ') {
        let start = offset + word.len() - word.trim_start_matches('(').len();
        let token = word.trim_start_matches('(').trim_end_matches([';', ',', ')', ':']);
        if let Some(id) = parse_reference(token) {
            found.push((start..start + token.len(), id));
        }
        offset += word.len() + 1;
    }
    found
}

/// `Kind.group/namespace/name` or `Kind.group/name` (a Kind starts with a capital letter: a
/// finalizer or annotation name such as `kubernetes.io/pvc-protection` is not an object).
fn parse_reference(token: &str) -> Option<ObjectId> {
    let mut parts = token.split('/');
    let kind_group = parts.next()?;
    let rest: Vec<&str> = parts.collect();
    let (namespace, name) = match rest.as_slice() {
        [name] => (None, *name),
        [namespace, name] if !namespace.is_empty() => (Some(*namespace), *name),
        _ => return None,
    };
    let (kind, group) = kind_group.split_once('.').unwrap_or((kind_group, ""));
    let is_kind = kind.starts_with(|c: char| c.is_ascii_uppercase()) && kind.chars().all(|c| c.is_ascii_alphanumeric());
    (is_kind && !name.is_empty()).then(|| ObjectId::new(group, kind, namespace, name))
}

/// The rows of the plan table; past a screenful (unless `--all-rows`), the first rows of each
/// wave and a row that says how many more there are.
pub fn plan_rows(plan: &PrunePlan, view: View) -> Vec<Vec<String>> {
    let shorten = !view.all_rows && plan.count() > SCREENFUL;
    let names = ShortNames::new(plan.waves.iter().flatten());
    let mut rows = Vec::new();
    for (wave, targets) in plan.waves.iter().enumerate() {
        let shown = if shorten { ROWS_PER_WAVE } else { targets.len() };
        for t in targets.iter().take(shown) {
            rows.push(row(wave + 1, t, &names, view.wide));
        }
        if targets.len() > shown {
            let mut more = vec![String::new(); if view.wide { WIDE_HEADERS.len() } else { HEADERS.len() }];
            more[0] = (wave + 1).to_string();
            more[1] = format!("... {} more", targets.len() - shown);
            if let Some(why) = more.last_mut() {
                *why = "all rows: --all-rows, or --plan-out FILE".to_string();
            }
            rows.push(more);
        }
    }
    rows
}

fn row(wave: usize, t: &Target, names: &ShortNames, wide: bool) -> Vec<String> {
    let namespace = t.id.namespace.clone().unwrap_or_default();
    if !wide {
        let why = names.why(&t.why, t.id.namespace.as_deref());
        return vec![wave.to_string(), names.kind(&t.id), namespace, t.id.name.clone(), why];
    }
    let finalizers = if t.finalizers.is_empty() {
        "<none>".to_string()
    } else {
        t.finalizers.join(",")
    };
    let tracked_by = if t.tracked_by.is_empty() {
        "<none>".to_string()
    } else {
        t.tracked_by.clone()
    };
    vec![
        wave.to_string(),
        t.id.kind_with_group(),
        namespace,
        t.id.name.clone(),
        t.uid.clone(),
        finalizers,
        tracked_by,
        t.why.clone(),
    ]
}

/// The plan table: fitted to `width` (the terminal's) unless wide.
pub fn plan_table(plan: &PrunePlan, view: View, width: Option<usize>) -> String {
    let rows = plan_rows(plan, view);
    if view.wide {
        crate::render::table(&WIDE_HEADERS, rows)
    } else {
        crate::render::table_fitted(&HEADERS, rows, width, &SHRINK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const FLUX: &str = "kustomize.toolkit.fluxcd.io";

    fn target(group: &str, kind: &str, namespace: Option<&str>, name: &str, why: &str) -> Target {
        Target {
            id: ObjectId::new(group, kind, namespace, name),
            kind: Arc::new(crate::cluster::fixtures::kind(group, kind, namespace.is_some())),
            uid: format!("uid-{name}"),
            why: why.into(),
            terminating: false,
            finalizers: vec![],
            tracked_by: String::new(),
        }
    }

    /// The README's teardown of `kustomization/operator`, whose dependent `usage` is pulled in.
    fn tour() -> PrunePlan {
        let usage = format!("member of Kustomization.{FLUX}/flux-system/usage");
        let operator = format!("member of Kustomization.{FLUX}/flux-system/operator");
        PrunePlan {
            waves: vec![
                vec![
                    target("", "ConfigMap", Some("shop"), "shop-settings", &usage),
                    target("apps", "Deployment", Some("shop"), "storefront", &usage),
                    target(
                        "demo.kubectl-stack.dev",
                        "Database",
                        Some("shop"),
                        "orders",
                        &format!("{usage}; before ServiceAccount/db-operator/db-operator (inferred: finalizer)"),
                    ),
                ],
                vec![target("", "Namespace", None, "shop", &usage)],
                vec![target(
                    FLUX,
                    "Kustomization",
                    Some("flux-system"),
                    "usage",
                    &format!("depends on Kustomization.{FLUX}/flux-system/operator (dependsOn)"),
                )],
                vec![
                    target(
                        "apiextensions.k8s.io",
                        "CustomResourceDefinition",
                        None,
                        "databases.demo.kubectl-stack.dev",
                        &operator,
                    ),
                    target("", "ServiceAccount", Some("db-operator"), "db-operator", &operator),
                ],
                vec![target(FLUX, "Kustomization", Some("flux-system"), "operator", "named")],
            ],
            ..Default::default()
        }
    }

    #[test]
    fn reasons_name_objects_as_kubectl_does() {
        let plan = tour();
        let rows = plan_rows(&plan, View::default());
        assert_eq!(rows[0][1], "ConfigMap");
        assert_eq!(rows[0][4], "member of kustomization/usage");
        assert_eq!(rows[1][1], "Deployment");
        assert_eq!(
            rows[2][4],
            "member of kustomization/usage; before serviceaccount/db-operator (inferred: finalizer)"
        );
        assert_eq!(rows[4][1], "Kustomization");
        assert_eq!(rows[4][4], "depends on kustomization/operator (dependsOn)");
        // -o wide: the kinds with their groups, the reasons in full, more columns.
        let wide = plan_rows(
            &plan,
            View {
                wide: true,
                all_rows: false,
            },
        );
        assert_eq!(wide[4][1], format!("Kustomization.{FLUX}"));
        assert_eq!(wide[4][4], "uid-usage");
        assert_eq!(wide[4][7], plan.waves[2][0].why);
    }

    #[test]
    fn a_kind_in_two_groups_and_a_name_in_two_namespaces_stay_apart() {
        let plan = PrunePlan {
            waves: vec![vec![
                target("a.example", "Widget", Some("one"), "w", "named"),
                target("b.example", "Widget", Some("two"), "w", "before Widget.a.example/one/w"),
                target("", "ConfigMap", Some("x"), "c", "member of Widget.b.example/two/w"),
            ]],
            ..Default::default()
        };
        let rows = plan_rows(&plan, View::default());
        assert_eq!(rows[0][1], "Widget.a.example");
        assert_eq!(rows[1][4], "before widget.a.example/w");
        assert_eq!(rows[2][4], "member of widget.b.example/w");
        let names = ShortNames::new(plan.waves.iter().flatten());
        let other = ObjectId::new("", "ConfigMap", Some("y"), "c");
        assert_eq!(names.reference(&other, Some("x")), "configmap/c in y");
        // Not objects: a finalizer, an annotation.
        let why = "before x (inferred: finalizer kubernetes.io/pvc-protection) config.kubernetes.io/depends-on";
        assert_eq!(names.why(why, None), why);
    }

    #[test]
    fn at_80_columns_no_row_of_the_tour_wraps() {
        let plan = tour();
        let text = plan_table(&plan, View::default(), Some(80));
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "{} columns: {line}\n{text}",
                line.chars().count()
            );
        }
        assert_eq!(text.lines().count(), plan.count() + 1, "{text}");
        // Names are kept whole as long as anything else can give way.
        assert!(text.contains(" storefront "), "{text}");
        // Unfitted (a pipe): everything in full.
        let full = plan_table(&plan, View::default(), None);
        // Only the widest cells are cut.
        assert!(
            text.contains(" ServiceAccount ") && text.contains(" Kustomization "),
            "{text}"
        );
        assert!(
            full.contains("databases.demo.kubectl-stack.dev   member of kustomization/operator"),
            "{full}"
        );
    }

    #[test]
    fn a_long_plan_shows_the_first_rows_of_each_wave() {
        let first: Vec<Target> = (0..1_200)
            .map(|i| target("", "ConfigMap", Some("shop"), &format!("c{i}"), "member"))
            .collect();
        let second = vec![
            target("", "Secret", Some("shop"), "s", "member"),
            target("", "ConfigMap", Some("shop"), "last", "member"),
        ];
        let plan = PrunePlan {
            waves: vec![first, second],
            ..Default::default()
        };
        let rows = plan_rows(&plan, View::default());
        assert_eq!(rows.len(), ROWS_PER_WAVE + 1 + 2);
        assert_eq!(rows[ROWS_PER_WAVE][1], "... 1195 more");
        assert_eq!(rows[ROWS_PER_WAVE][4], "all rows: --all-rows, or --plan-out FILE");
        // -o wide is more columns, not more rows.
        assert_eq!(
            plan_rows(
                &plan,
                View {
                    wide: true,
                    all_rows: false
                }
            )
            .len(),
            ROWS_PER_WAVE + 1 + 2
        );
        assert_eq!(
            plan_rows(
                &plan,
                View {
                    wide: false,
                    all_rows: true
                }
            )
            .len(),
            1_202
        );
    }
}
