//! The re-check before every wave: a teardown deletes exactly its plan, and only while the plan
//! still holds. Just before a wave's deletes, its objects are read again and every safeguard of
//! [`crate::prune::safeguards`] is applied again: an object re-created under a planned name, given a
//! keep marker or taken over by another stack is dropped; a Namespace or CRD that now holds
//! an object its deletion would take that the plan neither deletes nor accepted as a cascade
//! victim (another stack's, keep-marked, or an untracked newcomer) is dropped; an object that
//! something the plan does not delete started to depend on is dropped ([`dependents`]). What a
//! dropped object depends on is withheld from the later waves. Then the Flux suspensions prune
//! set on the wave's tracking objects are lifted (see [`crate::prune::suspend`]).

pub mod children;
pub mod dependents;
pub mod records;
pub mod watched;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use futures::StreamExt;
use kube::Client;

use crate::cluster::collect::{collect_kinds, Collection, ListFailure, ListOptions, ListScope, Listed};
use crate::cluster::discovery::{Catalog, KindInfo, KindsWatch};
use crate::cluster::session::Session;
use crate::graph::tracker_key;
use crate::graph::MemberRecord;
use crate::model::identity::ObjectId;
use crate::model::trackers::{MarkValue, Preset, Selection};
use crate::prune::cascade::by_name::{named_cascades, takers};
use crate::prune::cascade::owners::{dying_claims, owned_around, owner_cascades, Counted};
use crate::prune::cascade::volumes::{is_claim, is_volume, planned_claims};
use crate::prune::cascade::{
    contents, held_by_dying, reclaimed, unknown_content, victims, victims_dependents, Cascade, Planned,
};
use crate::prune::execute::{CheckedWave, Target, WaveGuard};
use crate::prune::suspend::Suspensions;
use crate::prune::teardown::PrunePlan;
use crate::stack::classify::Recorded;
use crate::stack::keep::{self, Claim, Context, KeepReason, Question, Trackers};
use crate::stack::keep::{tracked_elsewhere, TornDown};
use dependents::{argo_apps, graph_now, relist, Declaring, Relisted, Standing, WaveKey};
use records::OrphanRecords;

/// The re-check of one run (see the module documentation).
pub struct Recheck {
    session: Session,
    client: Client,
    catalog: Arc<Catalog>,
    torn_down: TornDown,
    trackers: Trackers,
    /// The tracker an orphan prune named: its tool's rules apply as in the plan.
    tracker: Option<crate::model::trackers::Tracker>,
    /// What an orphan prune's desired set needs: kpt's prune filters apply as in the plan.
    needs: crate::stack::desired::Needs,
    /// How an orphan prune's stacks placed their manifests when planned: each is read again.
    placements: crate::stack::inventory::Placements,
    recorded_stacks: HashSet<ObjectId>,
    depends_on: HashMap<ObjectId, Vec<ObjectId>>,
    trackers_of: HashMap<ObjectId, Vec<ObjectId>>,
    keep_suspended: HashSet<ObjectId>,
    planned: Planned,
    accepted_victims: HashSet<String>,
    /// What the plan keeps: a child a controller made that the plan keeps is a victim of its
    /// owner all the same (see [`crate::prune::cascade::owners::Counted`]).
    kept: HashSet<ObjectId>,
    /// The UID of each accepted cascade victim, with the UID of the planned Namespace or CRD
    /// that takes it.
    victim_holders: HashMap<String, String>,
    withheld: HashMap<ObjectId, String>,
    /// The mark each torn-down stack carried when last read: its record (read apart, see
    /// [`reads_beside`]) is read beside the stack itself the next time, and kept only when the
    /// stack still carries that mark.
    stack_marks: Mutex<HashMap<ObjectId, (Preset, MarkValue)>>,
    /// Every planned object with its UID.
    planned_uids: Vec<(ObjectId, String)>,
    /// UIDs of planned objects that a re-check dropped: they stay.
    dropped: HashSet<String>,
    /// UIDs of the objects of the waves already run: they are gone (or would be, with dry-run).
    done: HashSet<String>,
    options: ListOptions,
    /// Where the plan listed (where a new dependent is looked for).
    scope: ListScope,
    /// The suspensions of the run; lifted wave by wave.
    pub suspensions: Suspensions,
    /// Whether the plan inferred edges: the re-check infers the same.
    infer: bool,
    /// The watch of CRDs and APIServices that says when the catalog must be discovered again.
    kinds_watch: Option<Arc<KindsWatch>>,
    /// The watches of the planned kinds the wave's listing reads when they are fresh (see
    /// [`watched`]); none outside a Tokio runtime.
    watches: Option<watched::Watches>,
}

impl Recheck {
    /// The re-check of `plan`, which was made from the objects listed in `scope`.
    pub fn new(session: &Session, plan: &PrunePlan, suspensions: Suspensions, options: ListOptions) -> Self {
        Self {
            session: session.clone(),
            client: session.connection.client.clone(),
            catalog: session.catalog.clone(),
            torn_down: plan.torn_down.clone(),
            trackers: plan.trackers.clone(),
            tracker: plan.tracker.clone(),
            needs: plan.needs.clone(),
            placements: plan.placements.clone(),
            recorded_stacks: plan.recorded_stacks.clone(),
            depends_on: plan.depends_on.clone(),
            trackers_of: plan.trackers_of.clone(),
            keep_suspended: plan.keep_suspended.clone(),
            planned: Planned {
                uids: plan.waves.iter().flatten().map(|t| t.uid.clone()).collect(),
                ids: plan.waves.iter().flatten().map(|t| t.id.clone()).collect(),
                orphans: plan.orphan_dependents,
            },
            accepted_victims: plan
                .cascades
                .iter()
                .flat_map(|c| c.victims.iter().map(|v| v.uid.clone()))
                .collect(),
            victim_holders: victim_holders(plan),
            kept: crate::prune::cascade::owners::kept_on_their_own(&plan.kept),
            withheld: HashMap::new(),
            planned_uids: plan
                .waves
                .iter()
                .flatten()
                .map(|t| (t.id.clone(), t.uid.clone()))
                .collect(),
            stack_marks: Mutex::new(plan.stack_marks.clone()),
            dropped: HashSet::new(),
            done: HashSet::new(),
            options,
            scope: session.scope.clone(),
            suspensions,
            infer: plan.infer,
            kinds_watch: session.kinds_watch.clone(),
            watches: watch_planned(session, plan, options),
        }
    }

    /// Takes the kinds discovered again as the catalog (see [`refreshed`]).
    fn adopt(&mut self, fresh: Result<Catalog, kube::Error>) -> Result<(), Undiscovered> {
        let fresh = fresh.map_err(|e| Undiscovered(crate::error::root_cause(&e)))?;
        self.catalog = Arc::new(refreshed(&self.catalog, fresh));
        // What lists through the session (the dependents, the stacks' records) lists what the
        // server serves now too.
        self.session.catalog = self.catalog.clone();
        Ok(())
    }

    /// Whether the served kinds must be discovered again before this wave: always without a
    /// watch of the CRDs and APIServices; with one, when it cannot vouch for the catalog (see
    /// [`KindsWatch::take_change`]).
    fn rediscover(&self) -> bool {
        let Some(watch) = &self.kinds_watch else {
            tracing::debug!("re-check: discovering the served kinds again (no watch of CRDs and APIServices)");
            return true;
        };
        match watch.take_change(&self.catalog) {
            Some(why) => {
                tracing::debug!("re-check: discovering the served kinds again: {why}");
                true
            }
            None => {
                tracing::debug!("re-check: the served kinds are the plan's (no CRD or APIService changed)");
                false
            }
        }
    }

    /// Whether a re-check kept `target` from being deleted (dropped, or withheld for what it
    /// needs): a run that completes has not deleted it.
    pub fn kept_back(&self, target: &Target) -> bool {
        self.dropped.contains(&target.uid) || self.withheld.contains_key(&target.id)
    }

    /// Discovers the served kinds again (unless the watch of CRDs and APIServices vouches for the
    /// catalog: [`Recheck::rediscover`]) and reads the wave, what may depend on it and its stacks
    /// again with them. The reads start with the discovery, from the kinds served before it, and
    /// are kept when discovery finds the same kinds; otherwise (a kind installed, changed or
    /// removed since) they are made again with what the server serves now.
    async fn read_again(&mut self, candidates: &[Target]) -> ReadAgain {
        let started = std::time::Instant::now();
        let client = self.client.clone();
        let before = self.catalog.clone();
        // The owned objects come from the wave's listing when its scope covers where the
        // candidates' dependents can be; otherwise they are listed beside it.
        let apart = !self.listing_holds_owned(candidates);
        let rediscover = self.rediscover();
        let (fresh, mut listed, mut stacks, mut owned) = futures::join!(
            timed("discovery", discover_if(&client, rediscover)),
            self.list_again(candidates),
            timed("the stacks' records", self.reread_stacks(candidates)),
            timed("the owned objects", list_apart(self, apart, candidates))
        );
        // Nothing is judged when the kinds could not be discovered again.
        if let Err(why) = fresh.map_or(Ok(()), |fresh| self.adopt(fresh)) {
            return ReadAgain {
                undiscovered: Some(why),
                ..ReadAgain::default()
            };
        }
        // The same kinds at the same served versions (a version no longer served makes a
        // record's entry at it one its tool cannot map: the records are read again).
        let versions = |catalog: &Catalog| catalog.served_versions().collect::<HashSet<_>>();
        let same = before.kinds().iter().collect::<HashSet<_>>() == self.catalog.kinds().iter().collect::<HashSet<_>>()
            && versions(&before) == versions(&self.catalog);
        if !same {
            tracing::debug!("re-check: the served kinds changed: the wave and its dependents are read again");
            (listed, stacks, owned) = futures::join!(
                self.list_again(candidates),
                self.reread_stacks(candidates),
                list_apart(self, apart, candidates)
            );
        }
        tracing::debug!("re-check: the wave read again in {:?}", started.elapsed());
        let (current, declaring, from_listing) = listed;
        let owned = match owned.or(from_listing) {
            Some(owned) => owned,
            // A kind was not served as the wave was listed: listed apart after all.
            None => self.list_owned(candidates).await,
        };
        ReadAgain {
            undiscovered: None,
            current,
            declaring,
            stacks,
            owned,
        }
    }

    async fn check(&mut self, targets: Vec<Target>) -> CheckedWave {
        let started = std::time::Instant::now();
        let mut checked = CheckedWave::default();
        let mut candidates = Vec::new();
        for target in targets {
            match self.withheld.remove(&target.id) {
                Some(reason) => checked.dropped.push((target, reason)),
                None => candidates.push(target),
            }
        }
        // A kind installed since the plan (a CRD) can hold a new dependent or a newcomer in a
        // planned Namespace: what is listed again is what the server serves now.
        let ReadAgain {
            undiscovered,
            current,
            declaring,
            stacks: stacks_now,
            owned,
        } = self.read_again(&candidates).await;
        let records = self.orphan_records(&candidates, &current).await;
        let mut passed = Vec::new();
        for target in candidates {
            if let Some(why) = &undiscovered {
                checked
                    .dropped
                    .push((target, format!("could not be re-checked: {why}")));
                continue;
            }
            let now = current
                .get(&(
                    target.kind.group.clone(),
                    target.kind.kind.clone(),
                    target.id.namespace.clone(),
                ))
                .map(|listed| listed.as_ref().map(|objects| objects.get(&target.id.name)));
            let verdict = match now {
                Some(Ok(object)) => self.judge(&target, object, &stacks_now, &records),
                Some(Err(why)) => Some(format!("could not be re-checked: {why}")),
                None => Some("could not be re-checked".to_string()),
            };
            let verdict = match verdict {
                Some(reason) => Some(reason),
                None => self.judge_content(&target).await,
            };
            match verdict {
                Some(reason) => checked.dropped.push((target, reason)),
                None => {
                    let object = now
                        .and_then(Result::ok)
                        .flatten()
                        .filter(|o| o.uid() == target.uid)
                        .cloned();
                    passed.push((target, object));
                }
            }
        }
        let mut children = self.dying_children(&owned);
        let wave: Vec<Target> = passed.iter().map(|(target, _)| target.clone()).collect();
        let WaveReclaimed { nodes, volumes, taking } = self.wave_reclaimed(&wave, &owned).await;
        children.extend(nodes);
        timed(
            "dependents judged",
            self.judge_dependents(passed, (declaring, children, volumes), &mut checked),
        )
        .await;
        self.judge_owned(&mut checked, &owned);
        self.judge_named(&mut checked, &owned).await;
        drop_taking(&mut checked, taking);
        self.judge_dying_holders(&mut checked, &owned).await;
        self.lift_suspensions(&mut checked).await;
        for (target, _) in &checked.dropped {
            self.dropped.insert(target.uid.clone());
            self.withhold_dependencies(&target.id);
            let trackers = self.trackers_of.get(&target.id).cloned().unwrap_or_default();
            self.keep_suspended.extend(trackers);
        }
        self.done.extend(checked.targets.iter().map(|t| t.uid.clone()));
        tracing::debug!("re-check: wave judged in {:?}", started.elapsed());
        checked
    }

    /// What a still-planned object controls now that may run or serve a controller
    /// ([`crate::prune::cascade::owners::controlled_children`], as the plan adds them), for the
    /// wave's dependents to be judged on: one taken under a planned controller since the plan (a
    /// staying operator's ServiceAccount adopted mid-run) keeps that controller when a stayer
    /// runs with it (order review 27, F2).
    fn dying_children(&self, owned: &Collection) -> Vec<Listed> {
        let (planned, _) = self.still_planned();
        crate::prune::cascade::owners::controlled_children(&owned.objects, &planned)
    }

    /// Drops the wave's objects (still there, as planned) that an object the plan does not
    /// delete started to depend on since the plan, as the planner's needed-by-staying rule would
    /// have kept them (see [`dependents`]); the others go on to their deletes.
    async fn judge_dependents(
        &self,
        passed: Vec<(Target, Option<Listed>)>,
        (declaring, children, volumes): (Declaring, Vec<Listed>, Vec<ObjectId>),
        checked: &mut CheckedWave,
    ) {
        let present: Vec<Listed> = passed.iter().filter_map(|(_, object)| object.clone()).collect();
        if present.is_empty() {
            checked.targets.extend(passed.into_iter().map(|(target, _)| target));
            return;
        }
        let apps = argo_apps(present.iter().map(|o| &*o.meta));
        let mut declaring = declaring.for_apps(&apps);
        let known: HashSet<String> = declaring.objects.iter().map(|(o, _)| o.uid().to_string()).collect();
        let children = children.into_iter().filter(|child| !known.contains(child.uid()));
        declaring.objects.extend(children.map(|child| (child, Vec::new())));
        if self.infer {
            // The whole objects inference reads, as the plan read them (see `live::attach_specs`).
            if let Err(err) = self.read_specs(&present, &mut declaring).await {
                declaring
                    .failed
                    .push(format!("the objects inference reads ({})", err.message));
            }
        }
        if !declaring.failed.is_empty() {
            let why = format!(
                "what depends on it could not be re-checked ({} could not be listed)",
                declaring.failed.join(", ")
            );
            for (target, object) in passed {
                match object {
                    Some(_) => checked.dropped.push((target, why.clone())),
                    None => checked.targets.push(target),
                }
            }
            return;
        }
        let standing = self.standing(&present);
        let build = crate::graph::BuildOptions {
            orphan_dependents: self.planned.orphans,
            ..crate::graph::BuildOptions::for_catalog(&self.catalog, false, self.infer)
        };
        let mut now = graph_now(&declaring.objects, &present, &build, &declaring.bodies);
        // A reclaimed volume is held by its claim, and what it owns dies with it.
        let volumes = volumes.iter().filter_map(|id| now.graph.find(id));
        let volumes: Vec<usize> = volumes.collect();
        now.graph.victims.extend(volumes);
        let known = match &self.watches {
            Some(watches) => {
                let referenced: Vec<ObjectId> = now.graph.referenced().map(|n| n.id.clone()).collect();
                watches.lookup(&referenced, &self.catalog).await
            }
            None => HashMap::new(),
        };
        crate::graph::live::settle_references_known(&self.session, &mut now.graph, &now.objects, &known).await;
        let mut needed = now.needed(&present, &standing);

        for (target, _) in passed {
            match needed.remove(&target.uid) {
                Some(reason) => checked.dropped.push((target, reason)),
                None => checked.targets.push(target),
            }
        }
    }

    /// Reads whole, as the plan did ([`crate::graph::live::attach_specs`]), the wave's objects and the
    /// listed ones whose spec inference reads (a Service's selector, a workload's labels), unless
    /// they were read whole already (the stayers).
    async fn read_specs(&self, present: &[Listed], declaring: &mut Declaring) -> Result<(), crate::error::UserError> {
        let mut inputs: Vec<crate::graph::NodeInput> = present
            .iter()
            .chain(declaring.objects.iter().map(|(o, _)| o))
            .filter(|o| !declaring.bodies.contains_key(&o.id()))
            .map(crate::graph::live::input_from_listed)
            .collect();
        crate::graph::live::attach_specs(&self.session, &mut inputs).await?;
        for input in inputs {
            if let Some(body) = input.body {
                declaring.bodies.insert(input.id, body);
            }
        }
        self.read_backends(present, declaring).await;
        Ok(())
    }

    /// Adds the untracked Services the webhook configurations and APIServices call and the
    /// workloads they select, whole, as the plan adds them ([`crate::graph::stayers::backends`]).
    async fn read_backends(&self, present: &[Listed], declaring: &mut Declaring) {
        let inputs: Vec<crate::graph::NodeInput> = present
            .iter()
            .chain(declaring.objects.iter().map(|(o, _)| o))
            .map(|o| {
                let calls = crate::graph::stayers::is_stayer_kind(&o.kind.group, &o.kind.kind);
                crate::graph::NodeInput {
                    body: declaring.bodies.get(&o.id()).filter(|_| calls).cloned(),
                    ..crate::graph::live::input_from_listed(o)
                }
            })
            .collect();
        let found = crate::graph::stayers::backends(&self.session, &inputs).await;
        for unlisted in found.unlisted.iter().filter(|u| !u.forbidden) {
            tracing::warn!("re-check: cannot read {} ({})", unlisted.kind, unlisted.why);
            declaring.failed.push(unlisted.kind.clone());
        }
        for (object, body) in found.objects {
            declaring.bodies.insert(object.id(), body);
            declaring.objects.push((object, Vec::new()));
        }
    }

    /// Every object with an owner reference where the dependents of the wave's `candidates` can
    /// be, listed beside the wave itself (a superset of what [`Self::judge_owned`] needs: only
    /// the candidates that pass are judged).
    async fn list_owned(&self, candidates: &[Target]) -> Collection {
        if candidates.is_empty() {
            return Collection::default();
        }
        owned_around(
            &self.client,
            &self.catalog,
            candidates.iter().map(|t| &t.id),
            self.options,
        )
        .await
    }

    /// Drops the wave's objects whose deletion would now take, through the garbage collector, an
    /// object the plan does not delete and did not accept as a victim (made since the plan: see
    /// [`crate::prune::cascade::owners`], the plan's own rule), judged on `owned` ([`Self::list_owned`]).
    fn judge_owned(&self, checked: &mut CheckedWave, owned: &Collection) {
        if checked.targets.is_empty() {
            return;
        }
        let (planned, names) = self.still_planned();
        let mut taking: HashMap<ObjectId, String> = HashMap::new();
        let counted = Counted {
            torn_down: &self.torn_down,
            kept: &self.kept,
        };
        for cascade in owner_cascades(&owned.objects, &planned, &names, &counted) {
            if let Some(victim) = cascade.victims.iter().find(|v| !self.accepted_victims.contains(&v.uid)) {
                let why = format!(
                    "its deletion would take {} ({}), which is not pruned (found by the re-check)",
                    victim.id, victim.why
                );
                taking.insert(cascade.holder, why);
            }
        }
        drop_taking(checked, taking);
    }

    /// Drops the wave's objects whose deletion would now make the token, endpoints or pod garbage
    /// controller delete by name an object the plan did not accept as a victim, or take one
    /// through what those own, or whose such dependents could not be read (the plan's own rule,
    /// [`named_cascades`], for the wave's objects and what dies as their children: order reviews
    /// 29 to 31), judged on `owned`.
    async fn judge_named(&self, checked: &mut CheckedWave, owned: &Collection) {
        if checked.targets.is_empty() {
            return;
        }
        let wave: HashMap<String, ObjectId> = checked.targets.iter().map(|t| (t.uid.clone(), t.id.clone())).collect();
        let (planned, _) = self.still_planned();
        let counted = Counted {
            torn_down: &self.torn_down,
            kept: &self.kept,
        };
        let takers = takers(&owned.objects, &planned, &wave);
        if takers.is_empty() {
            return;
        }
        let named = named_cascades(&self.client, &self.catalog, &planned, &takers, &counted).await;
        let owning = named.owning(Some(&owned.objects));
        let walked = match owning.is_empty() {
            true => crate::prune::cascade::Dependents::default(),
            false => victims_dependents(&self.client, &self.catalog, &owning, &planned, &counted, self.options).await,
        };
        let mut taking: HashMap<ObjectId, String> = HashMap::new();
        let cascades = named
            .cascades
            .into_iter()
            .chain(walked.cascades)
            .map(|(cascade, _)| cascade);
        for cascade in cascades {
            let why = match cascade.victims.iter().find(|v| !self.accepted_victims.contains(&v.uid)) {
                Some(victim) => format!(
                    "its deletion would take {} ({}), which is not pruned (found by the re-check)",
                    victim.id, victim.why
                ),
                None => match cascade.unlisted.first() {
                    Some(kind) => {
                        format!("what its deletion would take could not be re-checked ({kind} could not be read)")
                    }
                    None => continue,
                },
            };
            taking.entry(cascade.holder).or_insert(why);
        }
        drop_taking(checked, taking);
    }

    /// What takes each dying claim (`claims`, by UID) whose volume the PV controller would
    /// reclaim and the plan did not accept as a victim, or whose volume owns such a victim (made
    /// or adopted since the plan: order review 28, F3), with why ([`reclaimed`], the plan's rule).
    async fn unaccepted_volumes(&self, claims: &HashMap<String, ObjectId>) -> HashMap<ObjectId, String> {
        if claims.is_empty() {
            return HashMap::new();
        }
        let found = self.reclaimed(claims).await;
        self.unaccepted_reclaimed(&found.cascades)
    }

    /// [`reclaimed`] of `claims`, as the plan counts victims.
    async fn reclaimed(&self, claims: &HashMap<String, ObjectId>) -> crate::prune::cascade::Reclaimed {
        let (planned, _) = self.still_planned();
        let counted = Counted {
            torn_down: &self.torn_down,
            kept: &self.kept,
        };
        reclaimed(&self.client, &self.catalog, &planned, claims, (&counted, self.options)).await
    }

    /// The holders of `cascades` (of [`reclaimed`]) that take a victim the plan did not accept,
    /// with why.
    fn unaccepted_reclaimed(&self, cascades: &[(Cascade, Vec<Listed>)]) -> HashMap<ObjectId, String> {
        let mut taking: HashMap<ObjectId, String> = HashMap::new();
        for (cascade, _) in cascades {
            let Some(victim) = cascade.victims.iter().find(|v| !self.accepted_victims.contains(&v.uid)) else {
                continue;
            };
            let how = match is_volume(&victim.id) {
                true => "make the PV controller delete",
                false => "take, with the volume the PV controller deletes,",
            };
            let why = format!(
                "its deletion would {how} {} ({}), which is not pruned (found by the re-check)",
                victim.id, victim.why
            );
            taking.entry(cascade.holder.clone()).or_insert(why);
        }
        taking
    }

    /// What the wave's claims take, read once for the wave (order review 28, F3): its claims and
    /// those a candidate's deletion takes as its children (judged on `owned`), the volumes the PV
    /// controller then reclaims and what those own ([`reclaimed`]). Its nodes and volumes join
    /// the graph the wave's dependents are judged on (a volume is held by its claim); its
    /// `taking` drops the wave's objects whose claims take a victim the plan did not accept (the
    /// plan's own rule; a Namespace's claims are judged with its content, [`Self::judge_content`]).
    async fn wave_reclaimed(&self, candidates: &[Target], owned: &Collection) -> WaveReclaimed {
        let wave: HashMap<String, ObjectId> = candidates.iter().map(|t| (t.uid.clone(), t.id.clone())).collect();
        let (planned, names) = self.still_planned();
        let wave_ids: HashSet<&ObjectId> = wave.values().collect();
        let children = dying_claims(&owned.objects, &planned, &names);
        let children: HashMap<String, ObjectId> = children
            .into_iter()
            .filter(|(_, holder)| wave_ids.contains(holder))
            .collect();
        let mut claims = planned_claims(&wave);
        claims.extend(children.clone());
        if claims.is_empty() {
            return WaveReclaimed::default();
        }
        let found = self.reclaimed(&claims).await;
        let taking = self.unaccepted_reclaimed(&found.cascades);
        let volumes = found.nodes.iter().map(Listed::id).filter(is_volume).collect();
        let mut nodes: Vec<Listed> = owned
            .objects
            .iter()
            .filter(|o| children.contains_key(o.uid()))
            .cloned()
            .collect();
        nodes.extend(found.nodes);
        WaveReclaimed { nodes, volumes, taking }
    }

    /// What the plan still deletes (not dropped by an earlier wave's re-check), and its objects by
    /// UID, as the cascade rules take them.
    fn still_planned(&self) -> (Planned, HashMap<String, ObjectId>) {
        let still: Vec<&(ObjectId, String)> = self
            .planned_uids
            .iter()
            .filter(|(_, uid)| !self.dropped.contains(uid))
            .collect();
        let planned = Planned {
            uids: still.iter().map(|(_, uid)| uid.clone()).collect(),
            ids: still.iter().map(|(id, _)| id.clone()).collect(),
            orphans: self.planned.orphans,
        };
        let names = still.iter().map(|(id, uid)| (uid.clone(), id.clone())).collect();
        (planned, names)
    }

    /// Drops the wave's objects that take, through the garbage collector, a Namespace or CRD the
    /// plan does not name that now holds an object the plan did not accept, or content that could
    /// not be listed (the plan's own rule, [`held_by_dying`]), judged on `owned`.
    async fn judge_dying_holders(&self, checked: &mut CheckedWave, owned: &Collection) {
        if checked.targets.is_empty() || self.planned.orphans {
            return;
        }
        let (planned, names) = self.still_planned();
        let wave: HashSet<&ObjectId> = checked.targets.iter().map(|t| &t.id).collect();
        let mut claims: HashMap<String, ObjectId> = HashMap::new();
        let found = held_by_dying(
            &self.client,
            &self.catalog,
            &owned.objects,
            &planned,
            &names,
            self.options,
            &mut claims,
        )
        .await;
        // A claim such a Namespace holds takes its volume (order review 23, F1).
        claims.retain(|_, holder| wave.contains(holder));
        let mut taking = self.unaccepted_volumes(&claims).await;
        for (cascade, _) in found {
            if !wave.contains(&cascade.holder) {
                continue;
            }
            let why = match cascade.victims.iter().find(|v| !self.accepted_victims.contains(&v.uid)) {
                Some(victim) => format!(
                    "its deletion would take {} ({}), which is not pruned (found by the re-check)",
                    victim.id, victim.why
                ),
                None => match cascade.unlisted.first() {
                    Some(unknown) => {
                        format!("what its deletion would take could not be re-checked ({unknown} could not be listed)")
                    }
                    None => continue,
                },
            };
            taking.insert(cascade.holder, why);
        }
        drop_taking(checked, taking);
    }

    /// Where the planned objects stand as the wave of `present` is about to be deleted.
    fn standing(&self, present: &[Listed]) -> Standing {
        let withheld: HashSet<&ObjectId> = self.withheld.keys().collect();
        let planned: HashSet<String> = self
            .planned_uids
            .iter()
            .filter(|(id, uid)| !withheld.contains(id) && !self.dropped.contains(uid))
            .map(|(_, uid)| uid.clone())
            .collect();
        let victims = self
            .victim_holders
            .iter()
            .filter(|(_, holder)| planned.contains(*holder))
            .map(|(victim, _)| victim.clone())
            .collect();
        Standing {
            leaving: self
                .done
                .iter()
                .cloned()
                .chain(present.iter().map(|o| o.uid().to_string()))
                .collect(),
            planned,
            victims,
        }
    }

    /// The torn-down stacks of the wave's members as they are now: each tracking object read
    /// again, whole, for its tool's policy and record (see [`judge_by_stacks`]).
    async fn reread_stacks(&self, targets: &[Target]) -> HashMap<ObjectId, StackNow> {
        let trackers: std::collections::BTreeSet<&ObjectId> = targets
            .iter()
            .filter_map(|t| self.trackers_of.get(&t.id))
            .flatten()
            .collect();
        // Every stack at once: each read is a round trip or two, and the wave waits for all.
        let reads: Vec<_> = trackers.into_iter().map(|id| self.reread_stack(id)).collect();
        futures::stream::iter(reads)
            .buffer_unordered(STACK_READS)
            .collect()
            .await
    }

    /// One torn-down stack read again (see [`read_stack`]).
    async fn reread_stack(&self, id: &ObjectId) -> (ObjectId, StackNow) {
        let Some(kind) = self.catalog.get(&id.group, &id.kind) else {
            return (
                id.clone(),
                StackNow::Unreadable(format!("{} is no longer served", id.kind)),
            );
        };
        let planned_uid = self
            .planned_uids
            .iter()
            .find(|(planned, _)| planned == id)
            .map(|(_, uid)| uid.as_str());
        let last_mark = lock_marks(&self.stack_marks).get(id).cloned();
        let (now, mark) = read_stack(&self.session, kind, id, planned_uid, &self.suspensions, last_mark).await;
        if let Some(mark) = mark {
            lock_marks(&self.stack_marks).insert(id.clone(), mark);
        }
        let now = match now {
            StackNow::Gone if planned_uid.is_some_and(|uid| self.done.contains(uid)) => StackNow::DeletedByThisRun,
            now => now,
        };
        (id.clone(), now)
    }

    /// The wave's objects as they are now, by (group, kind, namespace) and name, and the objects
    /// that may declare a dependency on them (see [`dependents`]), each kind listed once: a kind
    /// of the wave is listed in the re-check's scope for both, unless that scope does not cover
    /// its namespace (or it is a Flux kind, listed whole for its `spec.dependsOn`).
    async fn list_again(&self, targets: &[Target]) -> (Reread, Declaring, Option<Collection>) {
        if targets.is_empty() {
            return (Reread::new(), Declaring::default(), Some(Collection::default()));
        }
        let started = std::time::Instant::now();
        let groups = wave_groups(targets);
        let covered: HashSet<WaveKey> = groups.keys().filter(|key| self.shares_listing(key)).cloned().collect();
        let Relisted {
            mut wave,
            declaring,
            owned,
        } = {
            let fresh = match &self.watches {
                Some(watches) => watches.fresh_versions().await.map(|fresh| (watches, fresh)),
                None => None,
            };
            let watched = fresh.as_ref().map(|(watches, fresh)| (*watches, fresh));
            relist(&self.session, &self.scope, self.options, &covered, self.infer, watched).await
        };
        let apart: BTreeMap<WaveKey, Arc<KindInfo>> =
            groups.into_iter().filter(|(key, _)| !wave.contains_key(key)).collect();
        wave.extend(self.reread(apart).await);
        tracing::debug!(
            "re-check: the wave and {} object(s) that may declare dependencies listed again in {:?}",
            declaring.objects.len(),
            started.elapsed()
        );
        (wave, declaring, owned)
    }

    /// Whether the wave's listing ([`relist`], every kind in the re-check's scope) covers where
    /// the dependents of `candidates` can be ([`crate::prune::cascade::owners::scopes_of`]).
    fn listing_holds_owned(&self, candidates: &[Target]) -> bool {
        match &self.scope {
            ListScope::AllNamespaces => true,
            ListScope::Namespace(scope) => {
                let (scopes, cluster_scoped) =
                    crate::prune::cascade::owners::scopes_of(candidates.iter().map(|t| &t.id));
                !cluster_scoped
                    && scopes
                        .iter()
                        .all(|s| matches!(s, ListScope::Namespace(n) if n == scope))
            }
        }
    }

    /// Whether a (group, kind, namespace) of the wave is read from the dependents' listing: a
    /// kind listed there, in a namespace its scope covers.
    fn shares_listing(&self, key: &WaveKey) -> bool {
        let listed = self
            .catalog
            .listable()
            .any(|k| k.group == key.0 && k.kind == key.1 && !dependents::is_flux(k));
        let covered = match (&self.scope, &key.2) {
            (ListScope::AllNamespaces, _) | (_, None) => true,
            (ListScope::Namespace(scope), Some(namespace)) => scope == namespace,
        };
        listed && covered
    }

    /// The objects of `groups`, each (group, kind, namespace) listed whole, by name.
    async fn reread(&self, groups: BTreeMap<WaveKey, Arc<KindInfo>>) -> Reread {
        let mut found = HashMap::new();
        for (key, kind) in groups {
            let scope = match &key.2 {
                Some(namespace) => ListScope::Namespace(namespace.clone()),
                None => ListScope::AllNamespaces,
            };
            let listed = collect_kinds(&self.client, &[kind], &scope, &Selection::everything(), self.options).await;
            let result = match listed.failures.first() {
                Some(failure) => Err(failure.failure.clone()),
                None => Ok(listed.objects.into_iter().map(|o| (o.name().to_string(), o)).collect()),
            };
            found.insert(key, result);
        }
        found
    }

    /// Why a target must not be deleted any more, judged on the object as it is now by the keep
    /// chain ([`crate::stack::keep`]: the same rules as the plan, with its stacks' records and policies
    /// as they are now), then by the rules of a plan that has started.
    fn judge(
        &self,
        target: &Target,
        now: Option<&Listed>,
        stacks_now: &HashMap<ObjectId, StackNow>,
        orphan_records: &OrphanRecords,
    ) -> Option<String> {
        // Gone already, or gone and re-created under the planned name (another UID): the planned
        // object is gone; the DELETE's UID precondition leaves the new one alone and says so.
        let object = now.filter(|o| o.uid() == target.uid)?;
        let records = self.records_now(target, object, stacks_now);
        let question = match self.torn_down.is_empty() {
            // A mark added since the plan (another stack's) drops it below.
            true => Question::Orphan {
                tracker: self.tracker.as_ref(),
                recorded: None,
                compared: true,
                stack: None,
                needs: Some(&self.needs),
            },
            false => Question::Teardown {
                claims: claims_now(&records),
            },
        };
        let context = Context {
            question,
            trackers: Some(&self.trackers),
        };
        // An orphan already being deleted was planned to be waited for.
        if let Some(reason) = keep::reason(object, &context).filter(|r| *r != KeepReason::Terminating) {
            return Some(changed(&reason));
        }
        // An orphan's stacks, with their records and policies as they are now.
        if let Some(reason) = orphan_records.reason(object, &context) {
            return Some(changed(&reason));
        }
        marks_changed(
            object,
            target,
            &self.torn_down,
            self.trackers_of.contains_key(&target.id),
        )
    }

    /// For an orphan prune, the stacks that mark the wave's objects (as listed again), with their
    /// records read again ([`OrphanRecords`]); none for a teardown (its stacks are read by
    /// [`Self::reread_stacks`]).
    async fn orphan_records(&self, candidates: &[Target], current: &Reread) -> OrphanRecords {
        if !self.torn_down.is_empty() {
            return OrphanRecords::default();
        }
        let objects = candidates.iter().filter_map(|target| {
            let key = (
                target.kind.group.clone(),
                target.kind.kind.clone(),
                target.id.namespace.clone(),
            );
            current.get(&key)?.as_ref().ok()?.get(&target.id.name)
        });
        timed(
            "the stacks' records",
            OrphanRecords::read(&self.session, objects, &self.placements),
        )
        .await
    }

    /// The target's torn-down stacks as they are now, each with its record as it meets the
    /// object now (see [`StackNow`]).
    fn records_now<'a>(
        &'a self,
        target: &Target,
        object: &Listed,
        stacks_now: &'a HashMap<ObjectId, StackNow>,
    ) -> Vec<(&'a ObjectId, StackClaim)> {
        let trackers = self.trackers_of.get(&target.id).map(Vec::as_slice).unwrap_or_default();
        trackers
            .iter()
            .filter_map(|tracker| {
                let claim = match stacks_now.get(tracker)? {
                    StackNow::DeletedByThisRun => return None,
                    // Deleted by other means since the plan (membership review 13, F1): what
                    // still carries its mark is left, as a run again after it leaves it; its
                    // tool deleted nothing of it (a suspended stack deletes nothing).
                    StackNow::Replaced => StackClaim {
                        unreadable: Some(format!(
                            "its stack {tracker} was deleted and made again since the plan (another UID): what the new one tracks is left to it"
                        )),
                        ..StackClaim::default()
                    },
                    StackNow::Gone => StackClaim {
                        unreadable: Some(format!(
                            "its stack {tracker} was deleted since the plan, not by this run: what still carries its mark is left, as a run again leaves it (`prune ... --leftovers` takes it)"
                        )),
                        ..StackClaim::default()
                    },
                    // A record read at plan time and gone now (its status.inventory or the
                    // ApplySet id removed) says nothing of what its tool would delete: the
                    // labels do not take over.
                    StackNow::Read { record: None, .. } if self.recorded_stacks.contains(tracker) => StackClaim {
                        unreadable: Some("its record is gone since the plan".to_string()),
                        ..StackClaim::default()
                    },
                    StackNow::Read { leaves_members, record } => StackClaim {
                        record: record.as_ref().map(|r| r.meeting(object)),
                        leaves_members: leaves_members.clone(),
                        unreadable: None,
                    },
                    StackNow::Unreadable(why) => StackClaim {
                        unreadable: Some(why.clone()),
                        ..StackClaim::default()
                    },
                };
                Some((tracker, claim))
            })
            .collect()
    }

    /// For a Namespace or a CRD: an object it holds now that its deletion would take and that the
    /// plan did not accept (another stack's, kept, or any untracked newcomer; see
    /// [`crate::prune::cascade`]).
    async fn judge_content(&self, target: &Target) -> Option<String> {
        let held = contents(&self.client, &self.catalog, &target.id, self.options).await?;
        if let Some(unknown) = unknown_content(&self.catalog, &target.id, &held, &self.planned).first() {
            return Some(format!(
                "its content could not be re-checked ({unknown} could not be listed)"
            ));
        }
        let all = victims(&held.objects, &held.service_account_tokens, &self.planned);
        if let Some(victim) = all.iter().find(|v| !self.accepted_victims.contains(&v.uid)) {
            return Some(format!(
                "holds {} ({}), which is not pruned (found by the re-check)",
                victim.id, victim.why
            ));
        }
        let claims: HashMap<String, ObjectId> = held
            .objects
            .iter()
            .filter(|o| is_claim(&o.id()) && !self.planned.uids.contains(o.uid()))
            .map(|o| (o.uid().to_string(), target.id.clone()))
            .collect();
        if let Some(why) = self.unaccepted_volumes(&claims).await.into_values().next() {
            return Some(why);
        }
        self.judge_victims_dependents(target, all).await
    }

    /// What the accepted victims of a Namespace or CRD own dies with them (the plan's closure,
    /// [`victims_dependents`]): one the plan did not accept, or content that could not be
    /// listed, drops the holder (review 17, F2).
    async fn judge_victims_dependents(
        &self,
        target: &Target,
        victims: Vec<crate::prune::cascade::Victim>,
    ) -> Option<String> {
        if victims.is_empty() {
            return None;
        }
        let counted = Counted {
            torn_down: &self.torn_down,
            kept: &self.kept,
        };
        let found = [crate::prune::cascade::Cascade {
            holder: target.id.clone(),
            victims,
            unlisted: Vec::new(),
        }];
        let dependents = victims_dependents(
            &self.client,
            &self.catalog,
            &found,
            &self.planned,
            &counted,
            self.options,
        )
        .await;
        // A claim that dies with them takes its volume (order review 23, F1).
        let claims: HashMap<String, ObjectId> = dependents
            .claims
            .keys()
            .map(|uid| (uid.clone(), target.id.clone()))
            .collect();
        if let Some(why) = self.unaccepted_volumes(&claims).await.into_values().next() {
            return Some(why);
        }
        for (cascade, _) in dependents.cascades {
            if let Some(victim) = cascade.victims.iter().find(|v| !self.accepted_victims.contains(&v.uid)) {
                return Some(format!(
                    "its deletion would take {} ({}), which is not pruned (found by the re-check)",
                    victim.id, victim.why
                ));
            }
            if let Some(unknown) = cascade.unlisted.first() {
                return Some(format!(
                    "what its deletion would take could not be re-checked ({unknown} could not be listed)"
                ));
            }
        }
        None
    }

    /// Lifts the suspensions prune set on the wave's tracking objects, just before their deletes.
    async fn lift_suspensions(&mut self, checked: &mut CheckedWave) {
        let mut ready = Vec::new();
        for target in std::mem::take(&mut checked.targets) {
            if self.keep_suspended.contains(&target.id) {
                // Only a suspension this run holds is "still" its own (none in a dry run, none on
                // an object already being deleted when the run began).
                if self.suspensions.holds(&target.id) {
                    tracing::warn!(
                        "{} is deleted while still suspended: a member of it stays, which its controller's clean-up would delete",
                        target.id
                    );
                }
                ready.push(target);
                continue;
            }
            match self.suspensions.lift(&self.client, &target).await {
                Ok(()) => ready.push(target),
                Err(why) => checked.dropped.push((
                    target,
                    format!(
                        "its suspension could not be lifted ({why}): deleting it would skip its controller's cleanup"
                    ),
                )),
            }
        }
        checked.targets = ready;
    }

    /// Withholds from later waves what a dropped object depends on, transitively.
    fn withhold_dependencies(&mut self, dropped: &ObjectId) {
        let mut queue = vec![dropped.clone()];
        let mut seen = HashSet::new();
        while let Some(current) = queue.pop() {
            for dependency in self.depends_on.get(&current).cloned().unwrap_or_default() {
                if seen.insert(dependency.clone()) {
                    self.withheld
                        .entry(dependency.clone())
                        .or_insert_with(|| format!("needed by {current}, which was not deleted"));
                    queue.push(dependency);
                }
            }
        }
    }
}

/// Starts the watches of the plan's kinds (Flux kinds are listed whole, apart: not watched),
/// in the re-check's scope (see [`watched`]).
fn watch_planned(session: &Session, plan: &PrunePlan, options: ListOptions) -> Option<watched::Watches> {
    tokio::runtime::Handle::try_current().ok()?;
    let kinds = plan
        .waves
        .iter()
        .flatten()
        .map(|t| t.kind.clone())
        .filter(|k| !dependents::is_flux(k));
    Some(watched::Watches::start(
        &session.connection.client,
        &session.scope,
        options.page_size,
        kinds,
    ))
}

/// The owned objects listed apart from the wave's listing when `apart` (see [`Recheck::read_again`]).
async fn list_apart(recheck: &Recheck, apart: bool, candidates: &[Target]) -> Option<Collection> {
    match apart {
        true => Some(recheck.list_owned(candidates).await),
        false => None,
    }
}

/// The served kinds discovered again, when `rediscover`.
async fn discover_if(client: &Client, rediscover: bool) -> Option<Result<Catalog, kube::Error>> {
    match rediscover {
        true => Some(crate::cluster::discovery::discover(client).await),
        false => None,
    }
}

/// Awaits `future`, logging how long it took.
async fn timed<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let result = future.await;
    tracing::debug!("re-check: {what} read again in {:?}", started.elapsed());
    result
}

/// What the re-check read again before judging a wave (see [`Recheck::read_again`]).
#[derive(Default)]
struct ReadAgain {
    /// Why the served kinds could not be discovered again (nothing else is read then).
    undiscovered: Option<Undiscovered>,
    current: Reread,
    declaring: Declaring,
    stacks: HashMap<ObjectId, StackNow>,
    /// What has owners where the candidates' dependents can be ([`Recheck::list_owned`]).
    owned: Collection,
}

/// The wave's kinds as the re-check listed them, whole, by (group, kind, namespace) and name, or
/// why a kind could not be listed.
pub type Reread = HashMap<WaveKey, Result<HashMap<String, Listed>, ListFailure>>;

/// The kinds the server serves could not be discovered again: nothing of the wave is judged.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the kinds the server serves could not be read again ({0})")]
pub struct Undiscovered(String);

/// The wave's (group, kind, namespace)s, each with the kind its targets were planned with.
fn wave_groups(targets: &[Target]) -> BTreeMap<WaveKey, Arc<KindInfo>> {
    let mut groups = BTreeMap::new();
    for target in targets {
        let key = (
            target.kind.group.clone(),
            target.kind.kind.clone(),
            target.id.namespace.clone(),
        );
        groups.entry(key).or_insert_with(|| target.kind.clone());
    }
    groups
}

/// What a wave's claims take ([`Recheck::wave_reclaimed`]).
#[derive(Default)]
struct WaveReclaimed {
    /// The claims its objects take as children, the volumes reclaimed and what they own, as
    /// listed: nodes of the wave's graph.
    nodes: Vec<Listed>,
    /// The reclaimed volumes: victims of that graph.
    volumes: Vec<ObjectId>,
    /// The wave's objects whose claims take a victim the plan did not accept, with why.
    taking: HashMap<ObjectId, String>,
}

/// Moves the wave's targets named in `taking` to its dropped ones, each with its reason.
fn drop_taking(checked: &mut CheckedWave, mut taking: HashMap<ObjectId, String>) {
    if taking.is_empty() {
        return;
    }
    for target in std::mem::take(&mut checked.targets) {
        match taking.remove(&target.id) {
            Some(why) => checked.dropped.push((target, why)),
            None => checked.targets.push(target),
        }
    }
}

/// The UID of each cascade victim the plan accepted, with that of the planned holder that takes it.
fn victim_holders(plan: &PrunePlan) -> HashMap<String, String> {
    let uids: HashMap<&ObjectId, &str> = plan.waves.iter().flatten().map(|t| (&t.id, t.uid.as_str())).collect();
    plan.cascades
        .iter()
        .filter_map(|c| uids.get(&c.holder).map(|holder| (c, *holder)))
        .flat_map(|(c, holder)| c.victims.iter().map(move |v| (v.uid.clone(), holder.to_string())))
        .collect()
}

/// The catalog to re-check with: the kinds served now; a kind of a group version that could not be
/// discovered again stays from the earlier catalog, so that it is still listed (and a failed list
/// drops what it could hold) rather than silently skipped.
fn refreshed(earlier: &Catalog, fresh: Catalog) -> Catalog {
    if fresh.failures.is_empty() {
        return fresh;
    }
    let failed: HashSet<&str> = fresh.failures.iter().map(|f| f.group_version.as_str()).collect();
    let mut kinds: Vec<KindInfo> = fresh.kinds().iter().map(|k| (**k).clone()).collect();
    for kind in earlier.kinds() {
        if failed.contains(kind.api_version().as_str()) && fresh.get(&kind.group, &kind.kind).is_none() {
            kinds.push((**kind).clone());
        }
    }
    Catalog::new(kinds, fresh.failures.clone(), fresh.source).with_versions(fresh.served_versions())
}

impl WaveGuard for Recheck {
    fn before_wave(&mut self, _wave: usize, targets: Vec<Target>) -> BoxFuture<'_, CheckedWave> {
        Box::pin(self.check(targets))
    }

    fn children<'a>(&'a mut self, _wave: usize, deleted: &'a [Target]) -> BoxFuture<'a, Vec<Target>> {
        Box::pin(children::children(
            &self.client,
            &self.catalog,
            deleted,
            &self.done,
            &self.planned.uids,
            self.options,
            self.planned.orphans,
        ))
    }
}

/// Rule of the re-check: why a planned object's trackers' marks no longer allow its deletion
/// (the plan read other marks). `torn_down`: the stacks a teardown deletes the members of
/// (empty for an orphan prune); `member`: the teardown planned it as a member of one of them.
/// A stack a teardown names (a tracking object that is no member) is judged by its record
/// instead; a tracking object that is a member (a HelmRelease, a kpt inventory, an ApplySet
/// parent a Kustomization applies) or an orphan is judged by its marks like any other.
pub fn marks_changed(object: &Listed, target: &Target, torn_down: &TornDown, member: bool) -> Option<String> {
    if tracker_key(object).is_some() && !torn_down.is_empty() && !member {
        return None;
    }
    let now = crate::model::trackers::marks(&object.meta);
    let was_tracked = target.tracked_by != "<none>"; // `--untracked` plans untracked objects
    if now.is_empty() && was_tracked {
        return Some("no tool tracks it any more (changed since the plan)".to_string());
    }
    let marks_now = crate::model::trackers::describe_marks(&object.meta);
    let relabelled = was_tracked && marks_now != target.tracked_by;
    // An orphan is its stack's: relabelled since the plan (adopted by another stack), its old
    // stack's tool would no longer delete it.
    if torn_down.is_empty() {
        return relabelled.then(|| {
            format!(
                "its tracking marks changed since the plan ({} -> {marks_now})",
                target.tracked_by
            )
        });
    }
    if let Some(why) = tracked_elsewhere(&object.meta, torn_down) {
        return Some(format!("{why} (changed since the plan)"));
    }
    if !now.iter().any(|m| torn_down.covers(m)) {
        return Some("no stack being torn down tracks it any more (changed since the plan)".to_string());
    }
    // A teardown's member marked since the plan by another torn-down stack (or by one already
    // deleted by this run): the plan asked the tools of the marks it read, not this one's.
    relabelled.then(|| {
        format!(
            "its tracking marks changed since the plan ({} -> {marks_now})",
            target.tracked_by
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::discovery::{DiscoveryFailure, DiscoverySource};
    use crate::cluster::fixtures::kind;

    fn catalog(kinds: Vec<KindInfo>, failed: &[&str]) -> Catalog {
        let failures = failed
            .iter()
            .map(|gv| DiscoveryFailure {
                group_version: gv.to_string(),
                message: "503".to_string(),
            })
            .collect();
        Catalog::new(kinds, failures, DiscoverySource::PerGroup)
    }

    fn names(catalog: &Catalog) -> Vec<String> {
        catalog.kinds().iter().map(|k| k.kind_with_group()).collect()
    }

    /// Issue 29's generated worlds: a teardown member re-marked since the plan by another
    /// torn-down stack (one this run may have deleted already) is dropped, as a relabelled
    /// orphan is.
    #[test]
    fn a_member_relabelled_since_the_plan_is_dropped() {
        let flux = |name: &str| {
            crate::cluster::fixtures::meta(
                &[
                    (crate::model::trackers::FLUX_KS_NAME, name),
                    (crate::model::trackers::FLUX_KS_NAMESPACE, "flux-system"),
                ],
                &[],
            )
        };
        let listed = |name: &str| {
            let mut meta = flux(name);
            meta.name = Some("cm".into());
            meta.namespace = Some("app".into());
            meta.uid = Some("uid-cm".into());
            Listed::new(Arc::new(kind("", "ConfigMap", true)), meta)
        };
        let planned = listed("s1");
        let target = crate::prune::teardown::target(&planned, "member".into());
        let key = |name: &str| {
            let value = crate::model::trackers::MarkValue {
                name: name.into(),
                namespace: Some("flux-system".into()),
            };
            (Preset::Flux, value)
        };
        let torn_down = TornDown::new([key("s1"), key("s2")]);
        assert_eq!(marks_changed(&planned, &target, &torn_down, true), None);
        let why = marks_changed(&listed("s2"), &target, &torn_down, true).unwrap_or_default();
        assert!(why.contains("tracking marks changed since the plan"), "{why}");
        // An orphan prune (no stack torn down) says the same.
        let why = marks_changed(&listed("s2"), &target, &TornDown::default(), false).unwrap_or_default();
        assert!(why.contains("tracking marks changed since the plan"), "{why}");
        // A tracking object that is a member (a HelmRelease a Kustomization applies) is judged
        // by its marks too (review 8, finding A); one the teardown names is not.
        let release = |name: &str| {
            let mut meta = flux(name);
            meta.name = Some("child".into());
            meta.namespace = Some("app".into());
            meta.uid = Some("uid-child".into());
            Listed::new(Arc::new(kind("helm.toolkit.fluxcd.io", "HelmRelease", true)), meta)
        };
        let target = crate::prune::teardown::target(&release("s1"), "member".into());
        let why = marks_changed(&release("other"), &target, &torn_down, true).unwrap_or_default();
        assert!(why.contains("other"), "{why}");
        assert_eq!(marks_changed(&release("other"), &target, &torn_down, false), None);
    }

    #[test]
    fn a_kind_installed_since_the_plan_is_re_checked() {
        let earlier = catalog(vec![kind("", "ConfigMap", true)], &[]);
        let fresh = catalog(
            vec![kind("", "ConfigMap", true), kind("f4.example.com", "Widget", true)],
            &[],
        );
        let names = names(&refreshed(&earlier, fresh));
        assert!(names.contains(&"Widget.f4.example.com".to_string()), "{names:?}");
    }

    #[test]
    fn a_kind_whose_group_could_not_be_discovered_again_stays() {
        let widget = kind("f4.example.com", "Widget", true);
        let gv = widget.api_version();
        let earlier = catalog(vec![kind("", "ConfigMap", true), widget], &[]);
        let fresh = catalog(vec![kind("", "ConfigMap", true)], &[&gv]);
        assert_eq!(names(&refreshed(&earlier, fresh)).len(), 2);
    }

    #[test]
    fn a_kind_gone_from_the_server_is_not_listed_again() {
        let earlier = catalog(
            vec![kind("", "ConfigMap", true), kind("gone.example.com", "Old", true)],
            &[],
        );
        let fresh = catalog(vec![kind("", "ConfigMap", true)], &[]);
        assert_eq!(names(&refreshed(&earlier, fresh)), ["ConfigMap"]);
    }
}

/// A torn-down stack's tracking object as the re-check finds it.
#[derive(Debug)]
enum StackNow {
    /// Deleted by this run (after its members, so only past them): it says nothing new.
    DeletedByThisRun,
    /// Gone by other means: its members are left.
    Gone,
    /// Deleted and made again under its name since the plan (another UID): what the new one
    /// records is its own, and its members are left to it (membership review 14, F1).
    Replaced,
    /// Read: its tool's policy (why it would now leave its members behind) and record.
    Read {
        leaves_members: Option<String>,
        record: Option<RecordNow>,
    },
    /// Could not be read: its members are not deleted.
    Unreadable(String),
}

/// A torn-down stack's record as the re-check reads it.
#[derive(Debug)]
enum RecordNow {
    /// A Flux Kustomization's `status.inventory`.
    Ids(MemberRecord),
    /// A record beside the tracking object (kpt/cli-utils inventory, Helm release, ApplySet
    /// parent), read with the function the plan read it with.
    Beside(Recorded),
}

impl RecordNow {
    /// What the record holds of `object` (as [`Recorded::members`] decides for the plan).
    fn meeting(&self, object: &Listed) -> MemberRecord {
        match self {
            RecordNow::Ids(record) => record.clone(),
            RecordNow::Beside(recorded) => recorded.members([object]),
        }
    }
}

/// One torn-down stack's answer for one object, owned (see [`claims_now`]).
#[derive(Debug, Default)]
struct StackClaim {
    record: Option<MemberRecord>,
    leaves_members: Option<String>,
    unreadable: Option<String>,
}

/// The claims the keep chain reads, borrowed from the stacks' answers.
fn claims_now<'a>(records: &'a [(&'a ObjectId, StackClaim)]) -> Vec<Claim<'a>> {
    records
        .iter()
        .map(|(stack, claim)| Claim {
            stack,
            record: claim.record.as_ref(),
            leaves_members: claim.leaves_members.as_deref(),
            unreadable: claim.unreadable.as_deref(),
        })
        .collect()
}

/// A keep reason found by the re-check, as the run reports it.
fn changed(reason: &KeepReason) -> String {
    match reason {
        KeepReason::Keep { marker } => format!("{marker} was added since the plan"),
        KeepReason::ControllerOwned { owner } => {
            format!("its controller {owner} was set since the plan: it is left to it")
        }
        KeepReason::RecordUnreadable { why } => format!("could not be re-checked: {why}"),
        KeepReason::Untracked => "no tool tracks it any more (changed since the plan)".to_string(),
        other => format!("{other} (changed since the plan)"),
    }
}

/// Reads a tracking object whole (its spec and status hold its tool's policy and record) and,
/// for a tool that keeps its record beside it, that record, with the function the plan read it
/// with ([`crate::stack::inventory::uninstall_record_of`]). Its `spec.suspend` is the run's own, lifted
/// before its DELETE, only while the object as read now still holds exactly this run's
/// suspension ([`crate::prune::suspend::Suspensions::holds_now`]: the run's own annotation value, and
/// kubectl-stack alone set `spec.suspend`). Any other suspension — set by a user since the plan
/// (even on a stack this run suspended), or by another run, whatever annotation it carries — is
/// the stack's policy: a suspended Flux stack deletes nothing of its members.
async fn read_stack(
    session: &Session,
    kind: &KindInfo,
    id: &ObjectId,
    planned_uid: Option<&str>,
    suspensions: &crate::prune::suspend::Suspensions,
    last_mark: Option<(Preset, MarkValue)>,
) -> (StackNow, Option<(Preset, MarkValue)>) {
    let api = crate::cluster::collect::api_for(&session.connection.client, kind, id.namespace.as_deref());
    let stack = timed(
        "a stack",
        crate::cluster::retry::with_retries("re-read a stack", || api.get_opt(&id.name)),
    );
    // The record of the mark the stack carried when last read, read at once beside it (one
    // round trip instead of two); taken only if the stack still carries that mark.
    let beside = last_mark.filter(|(preset, _)| reads_beside(*preset));
    let early_record = async {
        match &beside {
            Some((preset, value)) => Some(read_record(*preset, value, session).await),
            None => None,
        }
    };
    let (object, early_record) = futures::future::join(stack, early_record).await;
    let object = match object {
        Ok(None) => return (StackNow::Gone, None),
        Ok(Some(object)) if planned_uid.is_some_and(|uid| object.metadata.uid.as_deref() != Some(uid)) => {
            return (StackNow::Replaced, None)
        }
        Ok(Some(object)) => object,
        Err(err) => return (StackNow::Unreadable(crate::error::root_cause(&err)), None),
    };
    let ours = suspensions.holds_now(id, &object.metadata, crate::prune::suspend::is_suspended(&object.data));
    let mut annotations = object.metadata.annotations.clone().unwrap_or_default();
    match ours {
        true => annotations.insert(crate::prune::suspend::SUSPENDED_BY.to_string(), "this run".to_string()),
        false => annotations.remove(crate::prune::suspend::SUSPENDED_BY),
    };
    let mut input = crate::graph::NodeInput {
        id: id.clone(),
        body: serde_json::to_value(&object).ok(),
        labels: object.metadata.labels.clone().unwrap_or_default().into(),
        annotations: annotations.into(),
        ..Default::default()
    };
    if let Some(body) = &input.body {
        input.impersonation = crate::stack::inventory::impersonation_of(session, id, body).await;
        input.unmapped = crate::stack::inventory::unmapped_entries(body, &session.catalog);
    }
    let leaves_members = crate::graph::orphans_members(&input);
    let mark = crate::graph::owner_mark(&input);
    if let Some(record) = crate::graph::flux_inventory_of(&input) {
        let record = Some(RecordNow::Ids(record));
        return (StackNow::Read { leaves_members, record }, mark);
    }
    let Some((preset, value)) = mark.clone().filter(|(preset, _)| reads_beside(*preset)) else {
        let read = StackNow::Read {
            leaves_members,
            record: None,
        };
        return (read, mark);
    };
    let record = match early_record {
        Some(record) if beside.as_ref() == Some(&(preset, value.clone())) => record,
        _ => read_record(preset, &value, session).await,
    };
    (
        record.map_or_else(StackNow::Unreadable, |recorded| StackNow::Read {
            leaves_members,
            record: recorded.map(RecordNow::Beside),
        }),
        mark,
    )
}

/// A stack's record beside its tracking object, read as the plan read it
/// ([`crate::stack::inventory::uninstall_record_of`]): what it records, or why it could not be read.
async fn read_record(preset: Preset, value: &MarkValue, session: &Session) -> Result<Option<Recorded>, String> {
    timed(
        "a record",
        crate::stack::inventory::uninstall_record_of(preset, value, session),
    )
    .await
    .map(|stack| stack.recorded)
    .map_err(|err| err.message)
}

/// Locks the marks of the stacks last read (a poisoned lock still holds them).
fn lock_marks(
    marks: &Mutex<HashMap<ObjectId, (Preset, MarkValue)>>,
) -> MutexGuard<'_, HashMap<ObjectId, (Preset, MarkValue)>> {
    marks.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How many torn-down stacks the re-check reads at once.
const STACK_READS: usize = 8;

/// Whether a tool keeps its record beside its tracking object (read apart, by
/// [`crate::stack::inventory::uninstall_record_of`]): kpt/cli-utils, a Flux HelmRelease's Helm release,
/// an ApplySet parent's own annotations (read again with its id verified).
pub fn keeps_record_beside(preset: Preset) -> bool {
    matches!(preset, Preset::Kpt | Preset::FluxHelm | Preset::ApplySet)
}

/// Whether a teardown reads a stack's record beside its tracking object ([`keeps_record_beside`]),
/// or what decides its members there: an Argo CD Application's control-plane settings (which
/// objects it tracks: membership review 26, F1), read by the same
/// [`crate::stack::inventory::uninstall_record_of`].
pub fn reads_beside(preset: Preset) -> bool {
    keeps_record_beside(preset) || preset == Preset::ArgoCd
}
