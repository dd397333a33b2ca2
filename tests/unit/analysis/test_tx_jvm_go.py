"""Go ``QueryRow`` of write SQL, Java calls through injected interface-typed fields, and
MyBatis mapper writes (planted sources, no repository code)."""

from __future__ import annotations

import textwrap

import pytest

from auditor.callgraph.graph import CallGraph, FunctionRef
from auditor.index.extract import index_source
from auditor.languages import language_for_path
from auditor.rules.loader import Rule, load_rule
from tests.support import SHOWN, analyze_source, reported


@pytest.fixture(scope="module")
def rule() -> Rule:
    return load_rule("tx-outside-transaction")


GO_RETURNING = {
    "store/accounts.go": """
        package store

        import (
            "database/sql"
            "net/http"
        )

        type Store struct{ db *sql.DB }

        type Row struct{ id int }

        func (r *Row) Scan(values ...any) error { return nil }

        func (s *Store) Open(w http.ResponseWriter, r *http.Request) {
            var id int
            query := `
                INSERT INTO accounts (name)
                VALUES ($1)
                RETURNING id
            `
            s.db.QueryRow(query, "x").Scan(&id)
            s.db.Exec("INSERT INTO ledgers (account_id) VALUES ($1)", id)
        }

        func (s *Store) Lookup(w http.ResponseWriter, r *http.Request) {
            var id int
            query := `SELECT id FROM accounts WHERE name = $1`
            s.db.QueryRow(query, "x").Scan(&id)
            s.db.Exec("UPDATE accounts SET seen = now() WHERE id = $1", id)
        }

        func (s *Store) OpenInTx(w http.ResponseWriter, r *http.Request) {
            var id int
            tx, _ := s.db.Begin()
            query := `INSERT INTO accounts (name) VALUES ($1) RETURNING id`
            tx.QueryRow(query, "x").Scan(&id)
            tx.Exec("INSERT INTO ledgers (account_id) VALUES ($1)", id)
            tx.Commit()
        }

        func Routes(s *Store) {
            http.HandleFunc("/open", s.Open)
            http.HandleFunc("/lookup", s.Lookup)
            http.HandleFunc("/open-tx", s.OpenInTx)
        }
        """,
}


def test_go_query_row_of_insert_returning_is_an_autocommit_write(rule: Rule):
    found = reported(analyze_source(GO_RETURNING, rule))
    opened = found[("store/accounts.go", "Store.Open")]
    assert opened.severity in SHOWN and "2 database writes" in opened.title
    # A SELECT through QueryRow is a read: only the Exec is a write.
    assert found[("store/accounts.go", "Store.Lookup")].severity == "low"
    assert ("store/accounts.go", "Store.OpenInTx") not in found


SERVICE = """
    package app.service;

    public interface IDeptService {
        int updateDept(Dept dept);
    }
    """

SERVICE_IMPL = """
    package app.service.impl;

    import org.springframework.beans.factory.annotation.Autowired;
    import app.mapper.DeptMapper;
    import app.service.IDeptService;

    public class DeptServiceImpl implements IDeptService {
        @Autowired
        private DeptMapper deptMapper;

        @Override
        public int updateDept(Dept dept) {
            Dept parent = deptMapper.selectDeptById(dept.getParentId());
            deptMapper.updateDeptChildren(dept.getDeptId(), parent.getAncestors());
            return deptMapper.updateDept(dept);
        }
    }
    """

CONTROLLER = """
    package app.web;

    import org.springframework.beans.factory.annotation.Autowired;
    import org.springframework.web.bind.annotation.PostMapping;
    import app.service.IDeptService;

    public class DeptController {
        @Autowired
        private IDeptService deptService;

        @PostMapping("/dept/edit")
        public int updateDept(Dept dept) {
            return deptService.updateDept(dept);
        }
    }
    """

MAPPER = """
    package app.mapper;

    public interface DeptMapper {
        Dept selectDeptById(Long id);
        int updateDeptChildren(Long id, String ancestors);
        int updateDept(Dept dept);
    }
    """


def _mybatis_app(impl: str = SERVICE_IMPL) -> dict[str, str]:
    return {
        "src/main/java/app/service/IDeptService.java": SERVICE,
        "src/main/java/app/service/impl/DeptServiceImpl.java": impl,
        "src/main/java/app/web/DeptController.java": CONTROLLER,
        "src/main/java/app/mapper/DeptMapper.java": MAPPER,
    }


def _graph(files: dict[str, str]) -> CallGraph:
    texts = {path: textwrap.dedent(text).lstrip("\n") for path, text in files.items()}
    return CallGraph.build({path: index_source(path, text, language_for_path(path) or "") for path, text in texts.items()})


def test_a_call_on_an_interface_typed_field_runs_its_one_implementation():
    graph = _graph(_mybatis_app())
    controller = FunctionRef("src/main/java/app/web/DeptController.java", "DeptController.updateDept")
    callees = {edge.callee for edge in graph.callees(controller)}
    assert callees == {FunctionRef("src/main/java/app/service/impl/DeptServiceImpl.java", "DeptServiceImpl.updateDept")}
    impl = FunctionRef("src/main/java/app/service/impl/DeptServiceImpl.java", "DeptServiceImpl.updateDept")
    # Mapper methods have no implementation in the repository: no edge (never the caller itself).
    assert impl not in {edge.callee for edge in graph.callees(impl)}


def test_two_mybatis_mapper_writes_outside_a_transaction_are_a_finding(rule: Rule):
    found = reported(analyze_source(_mybatis_app(), rule))
    finding = found[("src/main/java/app/service/impl/DeptServiceImpl.java", "DeptServiceImpl.updateDept")]
    assert finding.severity in SHOWN and "2 database writes" in finding.title
    assert finding.chain[0].function == "DeptController.updateDept"


def test_mapper_writes_inside_a_transactional_method_are_covered(rule: Rule):
    transactional = SERVICE_IMPL.replace("    @Override\n", "    @Override\n    @Transactional\n").replace(
        "import app.mapper.DeptMapper;", "import app.mapper.DeptMapper;\n    import org.springframework.transaction.annotation.Transactional;"
    )
    assert "@Transactional" in transactional
    assert not analyze_source(_mybatis_app(transactional), rule).findings


LOOKALIKES = """
    package app.web;

    import com.fasterxml.jackson.databind.ObjectMapper;
    import org.springframework.web.bind.annotation.PostMapping;
    import app.mapper.DeptConvertMapper;

    public class ProfileController {
        private ObjectMapper objectMapper;
        private DeptConvertMapper deptConvertMapper;

        @PostMapping("/profile")
        public Dept merge(Dept target, Dept source) {
            objectMapper.updateValue(target, source);
            deptConvertMapper.updateDeptFromDto(source, target);
            return target;
        }
    }
    """


def test_jackson_and_mapstruct_mappers_are_not_database_writes(rule: Rule):
    found = analyze_source({"src/main/java/app/web/ProfileController.java": LOOKALIKES}, rule)
    assert not found.findings


def test_a_transactional_interface_method_covers_its_implementation(rule: Rule):
    annotated = SERVICE.replace(
        "public interface IDeptService {\n", "import org.springframework.transaction.annotation.Transactional;\n\npublic interface IDeptService {\n    @Transactional\n"
    )
    assert "@Transactional" in annotated
    files = {**_mybatis_app(), "src/main/java/app/service/IDeptService.java": annotated}
    assert not analyze_source(files, rule).findings


OVERLOADS = {
    "src/main/java/app/web/BrandController.java": """
        package app.web;

        import org.springframework.web.bind.annotation.PostMapping;

        public class BrandController {
            private final BrandRepository brands;
            private final StringRedisTemplate redisTemplate;

            @PostMapping("/brand/delete")
            public void delete(Long id) {
                brands.delete(id);
                redisTemplate.delete("brand:" + id);
            }

            @PostMapping("/brand/delete/batch")
            public void delete(List<Long> ids) {
                brands.delete(ids);
            }
        }
        """,
}


def test_java_overloads_are_separate_functions():
    path = "src/main/java/app/web/BrandController.java"
    index = index_source(path, textwrap.dedent(OVERLOADS[path]).lstrip("\n"), "java")
    methods = [(d.name, d.qualname) for d in index.definitions if d.kind == "method"]
    assert methods == [("delete", "BrandController.delete"), ("delete", "BrandController.delete~2")]
    enclosing = {(call.callee, call.arguments): call.enclosing for call in index.calls}
    assert enclosing["brands.delete", "id"] == "BrandController.delete"
    assert enclosing["brands.delete", "ids"] == "BrandController.delete~2"


def test_overloads_and_redis_deletes_add_no_second_repository_call(rule: Rule):
    # One repository call per overload, and a Redis key delete is no database effect.
    assert not analyze_source(OVERLOADS, rule).findings


GO_WIRING = {
    "cmd/main.go": """
        package main

        import (
            "database/sql"
            "os"
            "syscall"
        )

        type Cron struct{}

        func (c *Cron) AddFunc(spec string, job func()) {}

        func refresh(db *sql.DB) {
            db.Exec("REFRESH MATERIALIZED VIEW stats")
        }

        func vacuum(db *sql.DB) {
            db.Exec("VACUUM ANALYZE")
        }

        func startJobs(db *sql.DB, c *Cron) {
            c.AddFunc("@hourly", func() {
                refresh(db)
            })
            c.AddFunc("@daily", func() {
                db.Exec("DELETE FROM sessions WHERE expired")
                db.Exec("UPDATE stats SET swept = now()")
            })
            go func() {
                refresh(db)
            }()
            go sweep(db)
        }

        func sweep(db *sql.DB) {
            db.Exec("DELETE FROM tokens WHERE expired")
            db.Exec("UPDATE stats SET tokens_swept = now()")
        }

        func restart() {
            syscall.Exec(os.Args[0], os.Args, os.Environ())
        }

        func main() {
            db, _ := sql.Open("postgres", "")
            startJobs(db, &Cron{})
            vacuum(db)
            restart()
        }

        func migrate(db *sql.DB) {
            db.Exec("UPDATE a SET x = 1")
            db.Transaction(func(tx *sql.Tx) error {
                return nil
            })
        }
        """,
}


def test_go_goroutines_and_callbacks_run_on_their_own(rule: Rule):
    path = "cmd/main.go"
    index = index_source(path, textwrap.dedent(GO_WIRING[path]).lstrip("\n"), "go")
    closures = [d.qualname for d in index.definitions if d.parent == "startJobs"]
    assert closures == ["startJobs.func1", "startJobs.func2", "startJobs.func3", "startJobs.func4"]
    # A callback with parameters (a transaction's) stays part of its function.
    assert not [d for d in index.definitions if d.parent == "migrate"]
    found = reported(analyze_source(GO_WIRING, rule))
    # The jobs' writes run later, each job on its own: main and startJobs sequence nothing.
    assert (path, "main") not in found and (path, "startJobs") not in found
    assert found[(path, "startJobs.func2")].severity in SHOWN
    assert found[(path, "refresh")].severity == "low"
    # A goroutine started by name sequences its own writes, not its starter's.
    assert found[(path, "sweep")].chain[0].function == "startJobs.func4"
    # syscall.Exec is no statement, and a VACUUM changes no row.
    assert (path, "restart") not in found and (path, "vacuum") not in found


def test_a_go_method_on_an_external_calls_result_resolves_to_no_repository_method():
    graph = _graph(GO_RETURNING)
    opened = FunctionRef("store/accounts.go", "Store.Open")
    # Scan is *sql.Row's; the repository's Row.Scan is another type's.
    assert FunctionRef("store/accounts.go", "Row.Scan") not in {edge.callee for edge in graph.callees(opened)}


def test_a_java_field_call_never_resolves_to_the_calling_method_itself():
    files = {
        "src/main/java/app/web/NoteController.java": """
            package app.web;

            public class NoteController {
                private NoteManager manager;

                public void archive(Long id) {
                    manager.archive(id);
                }
            }
            """,
        "src/main/java/app/service/NoteManagerImpl.java": """
            package app.service;

            public class NoteManagerImpl {
                public void archive(Long id) {
                }
            }
            """,
    }
    graph = _graph(files)
    caller = FunctionRef("src/main/java/app/web/NoteController.java", "NoteController.archive")
    assert caller not in {edge.callee for edge in graph.callees(caller)}


GO_MIDDLEWARE = {
    "web/middleware.go": """
        package web

        import (
            "database/sql"
            "net/http"
        )

        func remember(db *sql.DB, next http.Handler) http.Handler {
            return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
                db.Exec("INSERT INTO visits (path) VALUES ($1)", r.URL.Path)
                db.Exec("UPDATE counters SET visits = visits + 1")
                next.ServeHTTP(w, r)
            })
        }

        func Routes(db *sql.DB, mux *http.ServeMux) {
            db.Exec("UPDATE boot SET started = now()")
            mux.Handle("/", remember(db, mux))
        }

        func main() {
            Routes(nil, http.NewServeMux())
        }
        """,
}


def test_a_go_handler_literal_is_its_own_http_entry_point(rule: Rule):
    path = "web/middleware.go"
    result = analyze_source(GO_MIDDLEWARE, rule)
    found = reported(result)
    handler = found[(path, "remember.func1")]
    assert handler.severity in SHOWN and "http entry point" in handler.explanation
    # Setting the routes up runs one write; the handler's run per request, later.
    assert found[(path, "Routes")].severity == "low"


def test_a_go_callback_the_call_runs_itself_stays_part_of_its_function(rule: Rule):
    files = {
        "store/store.go": """
            package store

            import (
                "database/sql"
                "net/http"

                "github.com/cenkalti/backoff"
            )

            type Store struct{ db *sql.DB }

            func (s *Store) Transfer(w http.ResponseWriter, r *http.Request) {
                s.db.Exec("UPDATE accounts SET balance = balance - 1 WHERE id = 1")
                backoff.Retry(func() error {
                    _, err := s.db.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = 2")
                    return err
                }, backoff.NewExponentialBackOff())
            }

            func Routes(s *Store) {
                http.HandleFunc("/transfer", s.Transfer)
            }
            """,
    }
    found = reported(analyze_source(files, rule))
    transfer = found[("store/store.go", "Store.Transfer")]
    assert transfer.severity in SHOWN  # the retried update is the second write of one path
    assert ("store/store.go", "Store.Transfer.func1") not in found


def test_verdicts_that_read_the_file_are_not_shared_between_files(rule: Rule):
    # Go's package names and MyBatis field types come from the caller's own file: the same
    # call text in another file (another package named db, an inherited mapper field) must
    # not decide this one.
    other_go = """
        package jobs

        import (
            "net/http"
            "app/db"
        )

        func Sync(w http.ResponseWriter, r *http.Request) {
            db.QueryRow("INSERT INTO t (x) VALUES ($1) RETURNING id", x)
        }

        func Routes() { http.HandleFunc("/sync", Sync) }
        """
    store = """
        package store

        import (
            "database/sql"
            "net/http"
        )

        var db *sql.DB

        func Open(w http.ResponseWriter, r *http.Request) {
            db.QueryRow("INSERT INTO t (x) VALUES ($1) RETURNING id", x)
            db.Exec("INSERT INTO ledgers (account_id) VALUES ($1)", 1)
        }

        func Routes() { http.HandleFunc("/open", Open) }
        """
    alone = reported(analyze_source({"store/store.go": store}, rule))
    both = reported(analyze_source({"a/jobs.go": other_go, "store/store.go": store}, rule))
    assert alone[("store/store.go", "Open")].severity == both[("store/store.go", "Open")].severity in SHOWN
    legacy = """
        package aaa.legacy;

        import org.springframework.web.bind.annotation.PostMapping;

        public class LegacyDeptController extends BaseController {
            @PostMapping("/legacy/dept")
            public int edit(Dept dept) {
                deptMapper.updateDeptChildren(dept.getDeptId(), parent.getAncestors());
                return deptMapper.updateDept(dept);
            }
        }
        """
    key = ("src/main/java/app/service/impl/DeptServiceImpl.java", "DeptServiceImpl.updateDept")
    with_legacy = reported(analyze_source({**_mybatis_app(), "src/main/java/aaa/legacy/LegacyDeptController.java": legacy}, rule))
    assert with_legacy[key].severity == reported(analyze_source(_mybatis_app(), rule))[key].severity
