// The access table: which roles may run each operation of the schema. It is
// the one place where this is declared; the Gate enforces it before any
// resolver runs, and a test fails when an operation of the schema has no
// entry (an operation without one is refused: the table fails closed).

package auth

import (
	"maps"
	"strings"
)

// Access says who may run an operation.
type Access struct {
	// Roles may run it.
	Roles RoleSet
	// OwnOnly marks operations an agent runs over its own work only: the
	// resolvers narrow what it reads (listings, subscriptions, nested task
	// fields) to its agentId and refuse with FORBIDDEN what it names of
	// another agent (a task, a batch, a schedule, a submission as someone
	// else).
	OwnOnly bool
}

var (
	everyone   = SetOf(RoleAdmin, RoleOperator, RoleAgent, RoleReader)
	submitters = SetOf(RoleAdmin, RoleOperator, RoleAgent)
	operators  = SetOf(RoleAdmin, RoleOperator)
	admins     = SetOf(RoleAdmin)
	workers    = SetOf(RoleAdmin, RoleOperator, RoleWorker)
)

// operations is the table, by "Type.field" of the root types.
var operations = map[string]Access{
	// Reading: everyone; agents see only their own tasks, batches and
	// schedules (and only their own row of agents and of the plan).
	"Query.task":            {everyone, true},
	"Query.tasks":           {everyone, true},
	"Query.batch":           {everyone, true},
	"Query.agents":          {everyone, true},
	"Query.plan":            {everyone, true},
	"Query.schedules":       {everyone, true},
	"Query.schedule":        {everyone, true},
	"Query.lanes":           {everyone, false},
	"Query.lane":            {everyone, false},
	"Query.stats":           {everyone, false},
	"Query.policies":        {everyone, false},
	"Query.plugins":         {everyone, false},
	"Query.plugin":          {everyone, false},
	"Query.instances":       {everyone, false},
	"Query.instance":        {everyone, false},
	"Query.server":          {everyone, false},
	"Query.nodes":           {everyone, false},
	"Query.heartbeatChecks": {everyone, false},
	"Query.heartbeatCheck":  {everyone, false},

	// Work: submitted and handled by admins, operators and agents (their
	// own); readers change nothing.
	"Mutation.submitTask":  {submitters, true},
	"Mutation.submitTasks": {submitters, true},
	"Mutation.cancelTask":  {submitters, true},
	"Mutation.cancelTasks": {submitters, true},
	"Mutation.stopSession": {submitters, true},
	"Mutation.retryTask":   {submitters, true},
	"Mutation.resetTask":   {submitters, true},

	// Schedules submit work on a timetable: agents manage the schedules
	// that submit as them.
	"Mutation.createSchedule":  {submitters, true},
	"Mutation.updateSchedule":  {submitters, true},
	"Mutation.enableSchedule":  {submitters, true},
	"Mutation.disableSchedule": {submitters, true},
	"Mutation.triggerSchedule": {submitters, true},
	"Mutation.deleteSchedule":  {submitters, true},

	// Running the fleet: operators.
	"Mutation.updateLane":       {operators, false},
	"Mutation.createLane":       {operators, false},
	"Mutation.deleteLane":       {operators, false},
	"Mutation.setAgent":         {operators, false},
	"Mutation.drain":            {operators, false},
	"Mutation.registerInstance": {operators, false},
	"Mutation.updateInstance":   {operators, false},
	"Mutation.removeInstance":   {operators, false},
	"Mutation.configurePlugin":  {operators, false},
	"Mutation.enablePlugin":     {operators, false},
	"Mutation.setPolicy":        {operators, false},
	// Heartbeat checks make the server call out: operators.
	"Mutation.createHeartbeatCheck": {operators, false},
	"Mutation.updateHeartbeatCheck": {operators, false},
	"Mutation.deleteHeartbeatCheck": {operators, false},
	"Mutation.probeHeartbeatCheck":  {operators, false},

	// Pull lanes' workers: worker tokens on their own lanes only (checked
	// by the resolvers), admins and operators on every lane.
	"Mutation.leaseTasks":   {workers, false},
	"Mutation.renewLease":   {workers, false},
	"Mutation.completeTask": {workers, false},
	"Mutation.failTask":     {workers, false},
	"Mutation.releaseTask":  {workers, false},

	// Code that runs in the server: admins only.
	"Mutation.loadPlugin":   {admins, false},
	"Mutation.unloadPlugin": {admins, false},

	// Following: everyone; agents follow only their own tasks.
	"Subscription.taskEvents":      {everyone, true},
	"Subscription.taskEventFeed":   {everyone, true},
	"Subscription.task":            {everyone, true},
	"Subscription.stats":           {everyone, false},
	"Subscription.instanceEvents":  {everyone, false},
	"Subscription.pluginEvents":    {everyone, false},
	"Subscription.heartbeatEvents": {everyone, false},
}

// Operations returns a copy of the table, by "Type.field" (Query.task,
// Mutation.submitTask, Subscription.taskEvents).
func Operations() map[string]Access { return maps.Clone(operations) }

// Lookup returns the access of an operation: a root type ("Query",
// "Mutation" or "Subscription") and a field.
func Lookup(rootType, field string) (Access, bool) {
	a, ok := operations[rootType+"."+field]
	return a, ok
}

// Allows reports whether the access lets id run the operation (before the
// resolvers' row-level checks for agents).
func (a Access) Allows(id *Identity) bool { return id != nil && a.Roles.Has(id.Role) }

// Describe names the roles of an access for messages and documentation:
// "admin, operator, agent (own work)".
func (a Access) Describe() string {
	s := a.Roles.String()
	if a.OwnOnly && a.Roles.Has(RoleAgent) {
		s = strings.Replace(s, "agent", "agent (own work)", 1)
	}
	return s
}
