//! A deterministic synthetic corpus: **a testing and benchmarking aid**, not part of
//! the memory model.
//!
//! [`Corpus`] makes realistic, varied exchanges between many users and an agent —
//! introductions ("my name is …, I live in …, I work at …"), preferences and tools
//! ("I prefer Rust for parsers", "I'm learning Kotlin"), favourites, third-person
//! relations ("Priya reports to Tomas"), emotional messages, how-to questions and
//! chit-chat with a long Zipf-distributed vocabulary — and a query set over them
//! (fact lookups, entity names, multi-word questions, some filtered by user or
//! domain). Exchange `i` depends only on the seed and `i`, so any slice of a corpus
//! can be regenerated, and every run of a benchmark sees the same data.
//!
//! [`Corpus::entries`] shapes an exchange the way `observe` stores it (an episodic
//! "User: …\nAgent: …" memory plus the heuristic facts the default profile extracts),
//! for building large stores quickly with [`crate::Memory::add_batch`]; the real write
//! pipeline is exercised by feeding [`Exchange::user`] and [`Exchange::agent`] to
//! `observe_pair` / `observe_batch`.

use crate::model::{MemoryEntry, MemoryType, SomaticMarker, Timestamp, time};
use crate::write::{facts, sentiment, significance};
use crate::{DEFAULT_DOMAIN, Memory, Profile};

/// A small, fast, seedable PRNG (xorshift64*), enough for synthetic data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, zero included).
    #[must_use]
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so nearby seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform integer in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 11) as u128 * n as u128) >> 53) as usize
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A uniformly chosen element of a non-empty slice.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// An index in `0..n` with a Zipf-like (1/rank) distribution.
    pub fn zipf(&mut self, n: usize) -> usize {
        // Log-uniform over 1..=n+1 approximates Zipf with exponent 1.
        let x = ((n as f64 + 1.0).ln() * self.unit()).exp() - 1.0;
        (x as usize).min(n - 1)
    }
}

const FIRST: &[&str] = &[
    "Priya",
    "Tomas",
    "Aisha",
    "Mateo",
    "Yuki",
    "Lars",
    "Fatima",
    "Chen",
    "Olga",
    "Kwame",
    "Sofia",
    "Ravi",
    "Ingrid",
    "Diego",
    "Amara",
    "Hiro",
    "Elena",
    "Jonas",
    "Leila",
    "Marco",
    "Nadia",
    "Oskar",
    "Zara",
    "Pavel",
    "Mei",
    "Tariq",
    "Greta",
    "Kofi",
    "Lucia",
    "Anders",
    "Noor",
    "Felix",
    "Camila",
    "Dmitri",
    "Hana",
    "Emeka",
    "Astrid",
    "Rohan",
    "Ines",
    "Bruno",
    "Sana",
    "Viktor",
    "Maya",
    "Joao",
    "Freya",
    "Arjun",
    "Chloe",
    "Ibrahim",
    "Lena",
    "Samir",
    "Ayla",
    "Nikolai",
    "Rosa",
    "Kenji",
    "Elif",
    "Omar",
    "Clara",
    "Andrei",
    "Imani",
    "Pablo",
    "Sigrid",
    "Vikram",
    "Nora",
    "Tobias",
    "Amina",
    "Rafael",
    "Keiko",
    "Emil",
    "Zainab",
    "Luca",
    "Hedda",
    "Ade",
    "Beatriz",
    "Soren",
    "Anya",
    "Karim",
    "Julia",
    "Haruto",
    "Thandi",
    "Mikael",
    "Esra",
    "Gabriel",
    "Linnea",
    "Sunil",
    "Marta",
    "Yusuf",
    "Alma",
    "Stefan",
    "Ngozi",
    "Hugo",
    "Wren",
    "Idris",
    "Paloma",
    "Aleksander",
    "Mirela",
    "Kai",
    "Farah",
    "Otto",
    "Leona",
    "Tenzin",
];
const LAST: &[&str] = &[
    "Sharma",
    "Novak",
    "Okafor",
    "Garcia",
    "Tanaka",
    "Berg",
    "Haddad",
    "Wei",
    "Ivanova",
    "Mensah",
    "Rossi",
    "Patel",
    "Larsen",
    "Fernandez",
    "Diallo",
    "Sato",
    "Petrov",
    "Schmidt",
    "Karimi",
    "Bianchi",
    "Kowalski",
    "Nguyen",
    "Silva",
    "Andersson",
    "Yilmaz",
    "Mbeki",
    "Costa",
    "Fischer",
    "Moreau",
    "Kim",
    "Lindqvist",
    "Alvarez",
    "Hoffmann",
    "Nakamura",
    "Osei",
    "Dubois",
];
const CITIES: &[&str] = &[
    "Berlin",
    "Lisbon",
    "Tokyo",
    "Nairobi",
    "Toronto",
    "Oslo",
    "Lagos",
    "Seoul",
    "Madrid",
    "Melbourne",
    "Austin",
    "Prague",
    "Bangalore",
    "Montreal",
    "Stockholm",
    "Cape Town",
    "Dublin",
    "Amsterdam",
    "Vienna",
    "Helsinki",
    "Mexico City",
    "Bogota",
    "Santiago",
    "Warsaw",
    "Istanbul",
    "Cairo",
    "Singapore",
    "Jakarta",
    "Manila",
    "Hanoi",
    "Osaka",
    "Kyoto",
    "Zurich",
    "Geneva",
    "Munich",
    "Hamburg",
    "Lyon",
    "Marseille",
    "Barcelona",
    "Valencia",
    "Porto",
    "Milan",
    "Naples",
    "Athens",
    "Budapest",
    "Bucharest",
    "Krakow",
    "Tallinn",
    "Riga",
    "Vilnius",
    "Copenhagen",
    "Edinburgh",
    "Glasgow",
    "Manchester",
    "Bristol",
    "Leeds",
    "Boston",
    "Seattle",
    "Portland",
    "Denver",
    "Chicago",
    "Atlanta",
    "Miami",
    "Vancouver",
    "Calgary",
    "Lima",
    "Quito",
    "Accra",
    "Kigali",
    "Dakar",
    "Casablanca",
    "Tunis",
    "Dubai",
    "Doha",
    "Mumbai",
    "Pune",
    "Chennai",
    "Dhaka",
    "Karachi",
    "Taipei",
    "Shenzhen",
    "Auckland",
    "Wellington",
    "Brisbane",
    "Perth",
];
const COMPANIES: &[&str] = &[
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Stark Industries",
    "Wayne Enterprises",
    "Cyberdyne",
    "Soylent",
    "Tyrell",
    "Aperture",
    "Black Mesa",
    "Massive Dynamic",
    "Vandelay",
    "Pied Piper",
    "Wonka",
    "Oscorp",
    "Gringotts",
    "Monarch",
    "Nakatomi",
    "Weyland",
    "Blue Sun",
    "Dunder Mifflin",
    "Sterling Cooper",
    "Prestige Worldwide",
    "Bluth",
    "Krusty Krab",
    "Nimbus",
    "Octan",
    "Planet Express",
    "Rekall",
    "Spacely",
    "Virtucon",
    "Zorg",
    "Omni Consumer",
    "Gekko",
    "Contoso",
    "Fabrikam",
    "Northwind",
    "Tailspin",
    "Litware",
    "Adventure Works",
    "Lumon",
    "Hollis",
    "Delos",
    "Abstergo",
    "Kaiba",
    "Shinra",
    "Vault Tec",
    "Ingen",
];
const ROLES: &[&str] = &[
    "software engineer",
    "data scientist",
    "product manager",
    "designer",
    "nurse",
    "teacher",
    "researcher",
    "accountant",
    "site reliability engineer",
    "translator",
    "architect",
    "chef",
    "marketing lead",
    "security analyst",
    "technical writer",
    "consultant",
    "pharmacist",
    "mechanical engineer",
    "support agent",
    "recruiter",
];
const TECH: &[&str] = &[
    "Rust",
    "Python",
    "Go",
    "Kotlin",
    "TypeScript",
    "Haskell",
    "Elixir",
    "Julia",
    "Swift",
    "Zig",
    "Postgres",
    "SQLite",
    "Redis",
    "Kafka",
    "Kubernetes",
    "Docker",
    "Terraform",
    "React",
    "Svelte",
    "Django",
    "FastAPI",
    "Spark",
    "Pandas",
    "PyTorch",
    "TensorFlow",
    "Vim",
    "Emacs",
    "VS Code",
    "Neovim",
    "Figma",
    "Blender",
    "Unity",
    "Godot",
    "Flutter",
    "Clojure",
    "OCaml",
    "Scala",
    "Ruby",
    "Rails",
    "Laravel",
    "Nginx",
    "GraphQL",
    "gRPC",
    "Tailwind",
    "Webpack",
    "Vite",
    "Jupyter",
    "Airflow",
    "dbt",
    "Snowflake",
    "BigQuery",
    "Prometheus",
    "Grafana",
    "Ansible",
    "Nix",
    "Bazel",
    "CMake",
    "LLVM",
    "WebAssembly",
    "Tokio",
    "Axum",
    "Actix",
    "Diesel",
];
const TASKS: &[&str] = &[
    "parsing logs",
    "building APIs",
    "data pipelines",
    "unit testing",
    "profiling memory",
    "deploying services",
    "writing scripts",
    "training models",
    "plotting charts",
    "caching",
    "streaming events",
    "scheduling jobs",
    "migrating databases",
    "rendering scenes",
    "prototyping interfaces",
    "load testing",
    "fuzzing parsers",
    "writing docs",
    "code review",
    "debugging crashes",
    "handling retries",
    "tracing requests",
    "batch imports",
    "search ranking",
];
const FAV_CATS: &[(&str, &[&str])] = &[
    ("color", &["teal", "crimson", "ochre", "violet", "forest green", "navy", "amber", "coral"]),
    (
        "food",
        &["ramen", "dosa", "paella", "pierogi", "tacos", "injera", "pho", "risotto", "falafel"],
    ),
    ("book", &["Dune", "Middlemarch", "Beloved", "Solaris", "Neuromancer", "Persuasion", "Ubik"]),
    ("band", &["Radiohead", "Portishead", "Khruangbin", "Bjork", "Fela Kuti", "Low", "Mogwai"]),
    ("sport", &["climbing", "rowing", "fencing", "cricket", "handball", "badminton", "judo"]),
    ("season", &["autumn", "winter", "spring", "summer"]),
    ("animal", &["otter", "lynx", "heron", "octopus", "red panda", "axolotl", "capybara"]),
];
const ACTIVITIES: &[&str] = &[
    "hiking",
    "sailing",
    "bouldering",
    "birdwatching",
    "cycling",
    "kayaking",
    "camping",
    "skiing",
    "swimming",
    "running",
    "foraging",
    "stargazing",
    "gardening",
    "baking",
];
const ADJ: &[&str] = &[
    "lovely",
    "chaotic",
    "quiet",
    "exhausting",
    "surprising",
    "cold",
    "bright",
    "muddy",
    "calm",
    "noisy",
    "strange",
    "wonderful",
    "tedious",
    "crowded",
    "peaceful",
    "hectic",
    "gloomy",
];
const TEAMS: &[&str] = &[
    "platform",
    "payments",
    "search",
    "mobile",
    "infra",
    "growth",
    "data",
    "security",
    "design",
    "research",
    "billing",
    "onboarding",
    "analytics",
    "compliance",
];
const PROJECTS: &[&str] = &[
    "Atlas", "Beacon", "Cobalt", "Drift", "Ember", "Falcon", "Granite", "Harbor", "Indigo",
    "Juniper", "Kestrel", "Lumen", "Meridian", "Nebula", "Onyx", "Pioneer", "Quasar", "Rampart",
    "Sierra", "Tundra", "Umber", "Vortex", "Willow", "Xenon", "Yarrow", "Zephyr",
];
const POSITIVE: &[&str] =
    &["thrilled", "so happy", "excited", "really proud", "grateful", "relieved"];
const NEGATIVE: &[&str] =
    &["so frustrated", "really stressed", "annoyed", "worried", "exhausted", "upset"];
/// Common English words for chit-chat (most are indexed: the index keeps every
/// token of 3+ letters).
const COMMON: &[&str] = &[
    "the", "and", "was", "that", "with", "for", "this", "have", "but", "they", "some", "about",
    "after", "again", "really", "time", "day", "week", "people", "thing", "things", "work", "home",
    "morning", "evening", "coffee", "dinner", "friends", "family", "weather", "rain", "weekend",
    "movie", "music", "book", "walk", "park", "train", "meeting", "email", "plan", "idea",
    "problem", "question", "answer", "story", "photo", "garden", "kitchen", "office", "city",
    "street", "market", "river", "beach", "mountain", "trip", "flight", "hotel", "ticket",
];
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "tor", "vi", "sal", "den", "qua", "zer", "po", "lin", "mar", "tes",
    "bru", "fen", "gal", "hor", "jin", "kel", "mor", "nes", "pra", "rix", "sto", "tam", "ul",
    "ves", "wor", "yen", "zal", "dra", "fli", "gor", "hun", "ix", "jo", "kra", "lum", "nor",
];
/// Size of the long-tail vocabulary.
const TAIL_WORDS: usize = 30_000;

/// One synthetic exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The user's turn.
    pub user: String,
    /// The agent's reply.
    pub agent: String,
    /// The user it belongs to (`u0042`).
    pub user_id: String,
    /// Its domain (`default`, `work` or `personal`).
    pub domain: String,
}

/// A benchmark query, optionally filtered.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthQuery {
    /// The query text.
    pub text: String,
    /// A `user_id` filter to apply in filtered runs.
    pub user_id: String,
    /// A `domain` filter to apply in filtered runs.
    pub domain: String,
    /// What kind of query it is (`fact`, `entity`, `question`, `multi`).
    pub kind: &'static str,
}

/// A deterministic corpus generator. See the module docs.
#[derive(Debug, Clone)]
pub struct Corpus {
    seed: u64,
    users: usize,
    start: Timestamp,
    /// Projects the users are spread over (0: memories have no scope).
    projects: usize,
}

/// The id of the `k`th memory of exchange `i`: 12 hex digits, a bijection of
/// `(i, k)` for `i < 2^40`, so ids never collide yet spread like random ones.
#[must_use]
pub fn synthetic_id(i: u64, k: u8) -> String {
    const MASK: u64 = (1 << 48) - 1;
    // Multiplying by an odd number and xor-shifting right are both invertible
    // modulo 2^48.
    let mut x = ((i << 8) | u64::from(k)) & MASK;
    x = x.wrapping_mul(0x9E37_79B9_7F4B) & MASK;
    x ^= x >> 24;
    x = x.wrapping_mul(0xD6E8_FEB8_6659) & MASK;
    x ^= x >> 21;
    format!("{x:012x}")
}

impl Corpus {
    /// A corpus with `seed` and 1,000 users.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self::with_users(seed, 1_000)
    }

    /// A corpus with `seed` and `users` users (at least 1).
    #[must_use]
    pub fn with_users(seed: u64, users: usize) -> Self {
        let start = time::from_micros(1_700_000_000_000_000);
        Self { seed, users: users.max(1), start, projects: 0 }
    }

    /// The corpus with every memory scoped to its user's project, one of
    /// `projects` (`project:7`: see [`Corpus::scope_of`]); 0 leaves memories
    /// without a scope.
    #[must_use]
    pub fn with_projects(mut self, projects: usize) -> Self {
        self.projects = projects;
        self
    }

    /// The scope of the memories of the user `user_id` (`u0042`): `project:P`,
    /// where `P` is the user's number modulo the corpus's projects; `None` when
    /// the corpus has none or the id is not one of its users'.
    #[must_use]
    pub fn scope_of(&self, user_id: &str) -> Option<String> {
        let u: usize = user_id.strip_prefix('u')?.parse().ok()?;
        (self.projects > 0).then(|| format!("project:{}", u % self.projects))
    }

    /// Number of users.
    #[must_use]
    pub fn users(&self) -> usize {
        self.users
    }

    fn rng(&self, salt: u64, i: u64) -> Rng {
        Rng::new(
            self.seed
                ^ salt.wrapping_mul(0xA24B_AED4_963E_E407)
                ^ i.wrapping_mul(0x9FB2_1C65_1E98_DF5E),
        )
    }

    /// The id of user `u` (`u0042`).
    #[must_use]
    pub fn user_id(u: usize) -> String {
        format!("u{u:04}")
    }

    /// The full name of user `u` (stable for a corpus).
    #[must_use]
    pub fn user_name(&self, u: usize) -> String {
        let mut r = self.rng(1, u as u64);
        format!("{} {}", r.pick(FIRST), r.pick(LAST))
    }

    fn user_city(&self, u: usize) -> &'static str {
        let mut r = self.rng(2, u as u64);
        r.pick(CITIES)
    }

    fn user_company(&self, u: usize) -> &'static str {
        let mut r = self.rng(3, u as u64);
        r.pick(COMPANIES)
    }

    /// The creation time of exchange `i` (one every 30 seconds from Nov 2023).
    #[must_use]
    pub fn created_at(&self, i: u64) -> Timestamp {
        self.start + chrono::Duration::seconds(30 * i as i64)
    }

    /// Exchange number `i`. The first exchange of each user (`i < users`) is their
    /// introduction.
    #[must_use]
    pub fn exchange(&self, i: u64) -> Exchange {
        let mut r = self.rng(4, i);
        let u = if (i as usize) < self.users { i as usize } else { r.below(self.users) };
        let domain = match r.below(10) {
            0..=4 => DEFAULT_DOMAIN,
            5..=7 => "work",
            _ => "personal",
        };
        let name = self.user_name(u);
        let first = name.split(' ').next().unwrap_or("there").to_owned();
        let (user, agent) = if (i as usize) < self.users {
            let role = r.pick(ROLES);
            (
                format!(
                    "Hi! My name is {first}. I live in {} and I work at {} as a {role}.",
                    self.user_city(u),
                    self.user_company(u)
                ),
                format!("Nice to meet you, {first}! How is life in {}?", self.user_city(u)),
            )
        } else {
            self.body(&mut r, &first)
        };
        Exchange { user, agent, user_id: Self::user_id(u), domain: domain.to_owned() }
    }

    fn tail(&self, r: &mut Rng, words: usize) -> String {
        let mut out = Vec::with_capacity(words);
        for _ in 0..words {
            if r.chance(0.5) {
                out.push(r.pick(COMMON).to_owned());
            } else {
                out.push(tail_word(r.zipf(TAIL_WORDS)));
            }
        }
        out.join(" ")
    }

    fn body(&self, r: &mut Rng, first: &str) -> (String, String) {
        let tech = r.pick(TECH);
        let tech2 = r.pick(TECH);
        let task = r.pick(TASKS);
        let city = r.pick(CITIES);
        let p1 = r.pick(FIRST);
        let p2 = r.pick(FIRST);
        let team = r.pick(TEAMS);
        let project = r.pick(PROJECTS);
        let words = 4 + r.below(10);
        let tail = self.tail(r, words);
        match r.below(100) {
            0..=7 => (
                format!("I prefer {tech} for {task}, it just fits how I think. {tail}."),
                format!("{tech} is a solid choice for {task}. Want tips on {tech2} too?"),
            ),
            8..=13 => (
                format!("I'm learning {tech} these days, mostly for {task}."),
                format!("Good luck with {tech}, {first}! Start small with {task}."),
            ),
            14..=19 => (
                format!("I use {tech} for {task} at work, and {tech2} at home. {tail}."),
                format!("Mixing {tech} and {tech2} sounds practical."),
            ),
            20..=25 => {
                let (cat, vals) = FAV_CATS[r.below(FAV_CATS.len())];
                let v = r.pick(vals);
                (
                    format!("My favorite {cat} is {v}, by the way."),
                    format!("Noted: {v}! Any reason you love it?"),
                )
            }
            26..=29 => (
                format!("I'm building {project}, a tool for {task} in {tech}."),
                format!("{project} sounds fun. How far along is it?"),
            ),
            30..=41 => (
                format!(
                    "{p1} reports to {p2} now, and {p1} joined the {team} team on project {project}. {tail}."
                ),
                format!("Thanks for the update on {p1} and the {team} team."),
            ),
            42..=46 => (
                format!(
                    "I'm {} today! {p1} said the {project} launch went great.",
                    r.pick(POSITIVE)
                ),
                format!("That's wonderful news about {project}, congratulations!"),
            ),
            47..=52 => (
                format!(
                    "I'm {}. {tech} keeps crashing during {task} and the deadline is tomorrow. {tail}.",
                    r.pick(NEGATIVE)
                ),
                format!("That sounds stressful. Let's look at the {tech} crash together."),
            ),
            53..=62 => (
                format!("How do I speed up {task} with {tech}? {tail}?"),
                format!(
                    "For {task} in {tech}, measure first, then cache what repeats. {}",
                    self.tail(r, 6)
                ),
            ),
            63..=67 => (
                format!("What's the difference between {tech} and {tech2} for {task}?"),
                format!("{tech} favours explicitness; {tech2} favours speed of iteration."),
            ),
            _ => (
                format!(
                    "We went {} near {city} over the weekend, it was {}. {tail}.",
                    r.pick(ACTIVITIES),
                    r.pick(ADJ)
                ),
                format!("Sounds {}! {}.", r.pick(ADJ), self.tail(r, 5)),
            ),
        }
    }

    /// The memories `observe` would store for exchange `i` (default profile, every
    /// exchange taken as significant, no dedup against earlier facts): an episodic
    /// memory and the extracted facts, stamped with the user, domain and time.
    /// Ids are deterministic and look like soul-protocol's (12 hex digits spread
    /// evenly, [`synthetic_id`]), so an index keyed by id is as scattered as a
    /// real store's.
    #[must_use]
    pub fn entries(&self, i: u64) -> Vec<MemoryEntry> {
        let ex = self.exchange(i);
        let mut r = self.rng(5, i);
        let now = self.created_at(i);
        let somatic: SomaticMarker = sentiment::observe_sentiment(&ex.user, &ex.agent);
        let salience = 0.4 + 0.5 * r.unit();
        let mut e = MemoryEntry::new(
            MemoryType::Episodic,
            significance::episodic_content(&ex.user, &ex.agent),
        );
        e.id = synthetic_id(i, 0);
        e.importance = significance::episodic_importance(&somatic);
        e.emotion = Some(somatic.label.clone());
        e.somatic = Some(somatic);
        e.significance = 0.3 + 0.6 * r.unit();
        e.created_at = now;
        e.access_timestamps = vec![now];
        // `episodic_abstract(user, agent)`, from the content built above.
        e.r#abstract = Some(significance::generate_abstract(&e.content));
        e.salience = salience;
        e.user_id = Some(ex.user_id.clone());
        e.domain.clone_from(&ex.domain);
        let scope: Vec<String> = self.scope_of(&ex.user_id).into_iter().collect();
        e.scope.clone_from(&scope);
        let mut out = vec![e];
        for (k, cand) in
            facts::extract_facts(&ex.user, &ex.agent, Profile::Default).into_iter().enumerate()
        {
            let mut f = cand.into_entry(salience);
            f.id = synthetic_id(i, (k + 1).min(255) as u8);
            f.created_at = now;
            f.ingested_at = Some(now);
            f.user_id = Some(ex.user_id.clone());
            f.domain.clone_from(&ex.domain);
            f.scope.clone_from(&scope);
            out.push(f);
        }
        out
    }

    /// `n` queries over the corpus (the same for every corpus size), cycling
    /// through fact lookups, entity names, how-to questions and multi-word
    /// questions. Each names a user and domain for filtered runs.
    #[must_use]
    pub fn queries(&self, n: usize) -> Vec<SynthQuery> {
        (0..n)
            .map(|q| {
                let mut r = self.rng(6, q as u64);
                let u = r.below(self.users);
                let domain = match r.below(10) {
                    0..=4 => DEFAULT_DOMAIN,
                    5..=7 => "work",
                    _ => "personal",
                };
                let (text, kind) = match q % 8 {
                    0 => (format!("where does {} live", self.user_name(u)), "fact"),
                    1 => (format!("what does the user prefer for {}", r.pick(TASKS)), "fact"),
                    2 => {
                        let (cat, _) = FAV_CATS[r.below(FAV_CATS.len())];
                        (format!("favorite {cat}"), "fact")
                    }
                    3 => (r.pick(FIRST).to_owned(), "entity"),
                    4 => (format!("{} {}", r.pick(COMPANIES), r.pick(CITIES)), "entity"),
                    5 => (
                        format!("how do I speed up {} with {}", r.pick(TASKS), r.pick(TECH)),
                        "question",
                    ),
                    6 => (
                        format!("who reports to {} on the {} team", r.pick(FIRST), r.pick(TEAMS)),
                        "multi",
                    ),
                    _ => (format!("{} crashing deadline frustrated", r.pick(TECH)), "multi"),
                };
                SynthQuery { text, user_id: Self::user_id(u), domain: domain.to_owned(), kind }
            })
            .collect()
    }
}

impl Corpus {
    /// Stores the memories of exchanges `0, 1, 2, …` with [`Memory::add_batch`]
    /// (about `batch` memories per transaction) until the store holds at least `n`
    /// memories from this corpus. Calls `progress(memories so far)` after each
    /// batch. Returns the number of exchanges used: exchanges from that index on
    /// are new to the store.
    ///
    /// # Errors
    /// Storage errors from `add_batch`.
    pub fn fill(
        &self,
        mem: &Memory,
        n: u64,
        batch: usize,
        mut progress: impl FnMut(u64),
    ) -> crate::Result<u64> {
        let mut stored = 0u64;
        let mut next = 0u64;
        while stored < n {
            let mut entries = Vec::with_capacity(batch + 8);
            while entries.len() < batch && stored + (entries.len() as u64) < n {
                entries.extend(self.entries(next));
                next += 1;
            }
            stored += entries.len() as u64;
            mem.add_batch(entries)?;
            progress(stored);
        }
        Ok(next)
    }
}

/// Word `k` of the long-tail vocabulary: 2 to 4 syllables, unique per `k`.
fn tail_word(k: usize) -> String {
    let n = SYLLABLES.len();
    let mut x = k;
    let mut w = String::new();
    w.push_str(SYLLABLES[x % n]);
    x /= n;
    w.push_str(SYLLABLES[x % n]);
    x /= n;
    while x > 0 {
        w.push_str(SYLLABLES[(x - 1) % n]);
        x = (x - 1) / n;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_varied() {
        let c = Corpus::new(7);
        assert_eq!(c.exchange(1234), c.exchange(1234));
        assert_eq!(c.entries(5000), Corpus::new(7).entries(5000));
        let ids: std::collections::HashSet<String> =
            (0..20_000u64).flat_map(|i| [synthetic_id(i, 0), synthetic_id(i, 1)]).collect();
        assert_eq!(ids.len(), 40_000, "synthetic ids collide");
        assert!(ids.iter().all(|id| id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit())));
        // Spread: the ids of neighbouring exchanges start with many different digits.
        let firsts: std::collections::HashSet<char> =
            (0..64u64).filter_map(|i| synthetic_id(i, 0).chars().next()).collect();
        assert!(firsts.len() >= 12, "ids cluster: {firsts:?}");
        assert_ne!(c.exchange(1234), c.exchange(1235));
        let mut facts = 0;
        for i in 0..2_000 {
            facts += c.entries(i).len() - 1;
        }
        assert!(facts > 500, "only {facts} facts in 2000 exchanges");
        assert_eq!(c.queries(50), Corpus::new(7).queries(50));
    }

    #[test]
    fn tail_words_are_unique() {
        let set: std::collections::BTreeSet<String> = (0..TAIL_WORDS).map(tail_word).collect();
        assert_eq!(set.len(), TAIL_WORDS);
    }
}
