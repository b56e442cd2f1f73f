.PHONY: help run test test-race lint generate ci
help: ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'
run: ## run Limbo with demo data on embedded SQLite
	go run ./cmd/limbo serve --demo
test: ## the test suite (PostgreSQL tests run when it is reachable)
	go test ./...
test-race: ## the test suite under the race detector
	go test -race -count=1 ./...
lint: ## vet and formatting
	go vet ./... && test -z "$$(gofmt -l .)"
generate: ## regenerate templ output
	go tool templ generate
ci: ## what CI runs (needs root for PostgreSQL)
	bash .ci/run
