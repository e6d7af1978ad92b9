/*
 * Extra SSDT for the lab VMs: gives the two vCPUs _PCT/_PSS/_PPC (so acpi-cpufreq loads, with
 * 3.0/2.4/1.8/1.2 GHz P-states and a real scaling_governor) and _CST (so acpi_idle offers
 * POLL, C1, C2, C3; processor.max_cstate=1 leaves POLL and C1). Needs `-cpu EPYC-Rome`.
 * Copied from this workplace's notes: shared/notes/vm-lab/lab-pm.asl (see shared/notes/vm-lab.md).
 * Compiled by tests/lab/lab.sh with `iasl` and passed to QEMU with `-acpitable file=lab-pm.aml`.
 */
DefinitionBlock ("", "SSDT", 2, "LABVM", "LABPM", 1)
{
    External (\_SB.CPUS, DeviceObj)
    External (\_SB.CPUS.C000, ProcessorObj)
    External (\_SB.CPUS.C001, ProcessorObj)
    Scope (\_SB.CPUS)
    {
        Name (PCT0, Package () {
            ResourceTemplate () { Register (SystemIO, 16, 0, 0x0B20) },
            ResourceTemplate () { Register (SystemIO, 16, 0, 0x0B22) } })
        Name (PSS0, Package () {
            Package () { 3000, 20000, 10, 10, 0x00, 0x00 },
            Package () { 2400, 15000, 10, 10, 0x01, 0x01 },
            Package () { 1800, 10000, 10, 10, 0x02, 0x02 },
            Package () { 1200,  6000, 10, 10, 0x03, 0x03 } })
        Name (CST0, Package () { 3,
            Package () { ResourceTemplate () { Register (FFixedHW, 0, 0, 0) }, 1, 1, 1000 },
            Package () { ResourceTemplate () { Register (FFixedHW, 0, 0, 0) }, 1, 20, 500 },
            Package () { ResourceTemplate () { Register (FFixedHW, 0, 0, 0) }, 1, 100, 100 } })
    }
    Scope (\_SB.CPUS.C000) {
        Method (_PCT, 0) { Return (\_SB.CPUS.PCT0) }
        Method (_PSS, 0) { Return (\_SB.CPUS.PSS0) }
        Method (_PPC, 0) { Return (0) }
        Method (_CST, 0) { Return (\_SB.CPUS.CST0) }
    }
    Scope (\_SB.CPUS.C001) {
        Method (_PCT, 0) { Return (\_SB.CPUS.PCT0) }
        Method (_PSS, 0) { Return (\_SB.CPUS.PSS0) }
        Method (_PPC, 0) { Return (0) }
        Method (_CST, 0) { Return (\_SB.CPUS.CST0) }
    }
}
