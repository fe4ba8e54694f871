// The API client of t/79-openapi-client.t: a program written as a
// consumer writes one, against the types openapi-typescript generates
// (default options) from the served document (./api.d.ts), calling
// every operation through openapi-fetch on the demo data and checking
// the typed fields it reads.
//
// It compiles with tsc --strict only if the document is strict enough:
// a body that cannot be sent, a key left optional, a value whose null is
// missing or a shape left loose is a type error (the exact<>() lines say
// what each field's type must be). When it runs, an answer that is not
// what its type says fails a check.
//
//   PLATFORM_CLIENT='{"baseUrl":..., "token":..., "apiKey":...,
//                     "webhookKey":...}' node client.js
//
// Prints "ok - ..." or "not ok - ...: <got>" per check and
// "call METHOD PATH STATUS" per call; exits 1 when a check fails.

import createClient from "openapi-fetch";
import type { components, paths } from "./api.js";

type Schemas = components["schemas"];

// true when A and B are the same type (not merely assignable)
type Equal<A, B> =
    (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2)
        ? true : false;

// compiles only when the two types are the same
function exact<A, B>(same: Equal<A, B>): void {
    void same;
}

// the few things of Node.js this program uses (no @types/node needed)
declare const process: {
    env: Record<string, string | undefined>;
    exitCode?: number;
};

const cfg: { baseUrl: string; token: string; apiKey: string;
             webhookKey: string; otpCode: string } =
    JSON.parse(process.env.PLATFORM_CLIENT ?? "{}");

const client = createClient<paths>({ baseUrl: cfg.baseUrl });

const bearer = { Authorization: `Bearer ${cfg.token}` };
const tenancy = { tenantId: "tenant-demo", countryCode: "NG" };

let failed = 0;

function check(name: string, ok: boolean, got?: unknown): void {
    if (ok) {
        console.log(`ok - ${name}`);
    } else {
        failed++;
        console.log(`not ok - ${name}: ${JSON.stringify(got)}`);
    }
}

function called(method: string, path: string, response: Response): void {
    console.log(`call ${method} ${path} ${response.status}`);
    check(`${method} ${path}: 200`, response.status === 200,
          response.status);
    check(`${method} ${path}: X-Request-Id`,
          (response.headers.get("X-Request-Id") ?? "") !== "");
}

function isDateTime(v: string): boolean {
    return /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/
        .test(v);
}

// the exact types of the fields read below: required, null where the
// document allows it, nothing looser

exact<Schemas["DeliveryOrder"]["driver"], Schemas["OrderDriver"] | null>(
    true);
exact<Schemas["DeliveryOrder"]["shippingFee"], number | null>(true);
exact<Schemas["DeliveryOrder"]["status"],
      "PENDING" | "ASSIGNED" | "PICKED_UP" | "IN_TRANSIT" | "DELIVERED"
      | "CANCELLED">(true);
exact<Schemas["OrderAddress"]["latitude"], number | null>(true);
exact<Schemas["OrderDriver"]["phone"], string | null>(true);
exact<Schemas["Vehicle"]["driver"], Schemas["Driver"] | null>(true);
exact<Schemas["Vehicle"]["year"], string | null>(true);
exact<Schemas["Driver"]["userId"], string | null>(true);
exact<Schemas["AvailableDriver"]["vehicle"],
      Schemas["DriverVehicle"] | null>(true);
exact<Schemas["PersonAccount"]["availableBalance"], number>(true);
exact<Schemas["PersonDocument"]["approved"], boolean>(true);
exact<Schemas["BankTransfer"]["account"], Schemas["BankAccount"]>(true);
exact<Schemas["CounterpartyAccount"]["iban"], string | null>(true);
exact<Schemas["CounterpartyGroup"]["id"], string>(true);
exact<Schemas["TradeFlow"]["description"], string>(true);
exact<Schemas["WebhookReceipt"],
      Schemas["WebhookStored"] | Schemas["WebhookDuplicate"]>(true);
exact<Schemas["WebhookStored"], { id: number; duplicate: false }>(true);
exact<Schemas["BusinessVerification"]["verificationStatus"],
      "VERIFIED" | "NAME_MISMATCH">(true);
exact<Schemas["SaleAnswer"]["data"], Schemas["SaleDocument"]>(true);
exact<Schemas["SaleDocument"]["paymentStatus"],
      "PENDING" | "PARTIALLY_PAID" | "PAID">(true);
exact<Schemas["SaleDocument"]["customer"], Schemas["Party"]>(true);
exact<Schemas["SaleDocument"]["products"], Schemas["SaleProduct"][]>(true);
exact<Schemas["SaleProduct"]["productName"], string | null>(true);
exact<Schemas["Sale"]["settlementAttemptNextRetry"], string | null>(true);
exact<Schemas["Sale"]["saleDetails"], Schemas["SaleDetail"][]>(true);
exact<Schemas["Sale"]["saleTransaction"], Schemas["SaleTransaction"]>(true);
exact<Schemas["SaleTransaction"]["nextRetry"], string | null>(true);
exact<Schemas["SaleDetail"]["product"], Schemas["Product"]>(true);
// a stored document's keys are as stored: optional, typed
exact<Schemas["Party"]["wallet"], Schemas["Wallet"] | undefined>(true);
exact<Schemas["Product"]["promotion"], Schemas["Promotion"] | undefined>(
    true);

async function otp(): Promise<void> {
    const path = "/validate-otp/{otpCode}";
    const { data, response } = await client.GET(path, {
        params: { path: { otpCode: cfg.otpCode }, header: tenancy },
    });
    called("GET", path, response);
    check("OTP: validated", data?.message === "OTP code validated",
          data?.message);
    const empty: Record<string, never> | undefined = data?.data;
    check("OTP: data is {}",
          empty !== undefined && Object.keys(empty).length === 0, empty);
}

async function products(): Promise<void> {
    const path = "/api/v1/products/classifications";
    const { data, response } = await client.GET(path);
    called("GET", path, response);
    const groups: Schemas["Classifications"]["classifications"] =
        data?.classifications ?? [];
    check("classifications: groups", groups.length > 0, groups);
    const tags: string[] = groups[0]?.tags ?? [];
    check("classifications: a group's tags", typeof groups[0]?.group
          === "string" && tags.every((t) => typeof t === "string"), groups);

    const head = await client.HEAD(path);
    called("HEAD", path, head.response);
}

async function tms(): Promise<void> {
    const order = "a1000000-0000-4000-8000-000000000001";
    const driver = "d1000000-0000-4000-8000-000000000005";

    const path1 =

        "/tms/delivery-orders/{deliveryOrderUuid}/assign/{driverId}";
    const assign = await client.PATCH(
        "/tms/delivery-orders/{deliveryOrderUuid}/assign/{driverId}", {
            params: { path: { deliveryOrderUuid: order, driverId: driver },
                      query: { shippingFee: 2500 }, header: tenancy },
        });
    called("PATCH", path1, assign.response);
    check("assign: done", assign.data?.status === true
          && assign.data.errors.length === 0, assign.data);

    const path2 = "/tms/delivery-orders/{deliveryOrderUuid}";
    const got = await client.GET("/tms/delivery-orders/{deliveryOrderUuid}", {
        params: { path: { deliveryOrderUuid: order }, header: tenancy },
    });
    called("GET", path2, got.response);
    const o = got.data?.data;
    check("order: its number", o?.orderNumber === "DO-1001", o);
    check("order: assigned", o?.status === "ASSIGNED", o?.status);
    const fee: number | null = o ? o.shippingFee : null;
    check("order: the fee", fee === 2500, fee);
    const d: Schemas["OrderDriver"] | null = o ? o.driver : null;
    check("order: its driver", d?.id === driver
          && d.status === "ON_DELIVERY", d);
    const city: string | null = o ? o.pickupAddress.city : null;
    check("order: the pick-up city", city === "Kano", city);
    check("order: createdAt", o !== undefined && isDateTime(o.createdAt), o);
    check("order: assignedAt", typeof o?.assignedAt === "string", o);

    const head = await client.HEAD("/tms/delivery-orders/{deliveryOrderUuid}",
        { params: { path: { deliveryOrderUuid: order }, header: tenancy } });
    called("HEAD", path2, head.response);

    const path3 = "/tms/vehicles/{uuid}";
    const vehicle = await client.PUT("/tms/vehicles/{uuid}", {
        params: { path: { uuid: "31000000-0000-4000-8000-000000000004" },
                  header: tenancy },
        headers: bearer,
        body: { colour: "blue", year: "2021", capacity: "1450.5",
                assignDriver: true, driverUserId: "user-demo-driver-5",
                imageUrl: null },
    });
    called("PUT", path3, vehicle.response);
    const v = vehicle.data?.data;
    check("vehicle: the colour", v?.colour === "blue", v);
    check("vehicle: the year, a string", v?.year === "2021", v?.year);
    check("vehicle: imageUrl cleared", v?.imageUrl === null, v?.imageUrl);
    check("vehicle: its driver", v?.driver?.userId === "user-demo-driver-5"
          && v.driverUserId === "user-demo-driver-5", v);

    const path4 = "/tms/drivers/available";
    const drivers = await client.GET("/tms/drivers/available", {
        params: { query: { vehicleType: "VAN" }, header: tenancy },
        headers: bearer,
    });
    called("GET", path4, drivers.response);
    const list: Schemas["AvailableDriver"][] = drivers.data?.data ?? [];
    check("drivers: some", list.length > 0, list);
    check("drivers: all available, of a VAN", list.every(
        (a) => a.status === "AVAILABLE" && a.vehicleType === "VAN"), list);
    const plate: string | null | undefined = list[0]?.vehicle?.licensePlate;
    check("drivers: a vehicle's plate", typeof plate === "string", plate);

    const head2 = await client.HEAD("/tms/drivers/available", {
        params: { query: { vehicleType: "VAN" }, header: tenancy },
        headers: bearer,
    });
    called("HEAD", path4, head2.response);
}

async function trades(): Promise<void> {
    const path = "/api/v1/trades/process-flows";
    const init = {
        params: { query: { name: "export" } },
        headers: { ...bearer, apiKey: cfg.apiKey },
    };
    const { data, response } = await client.GET(path, init);
    called("GET", path, response);
    const flows: Schemas["TradeFlow"][] = data?.data ?? [];
    check("flows: named export", flows.length > 0 && flows.every(
        (f) => f.name.toLowerCase().includes("export")), flows);

    const head = await client.HEAD(path, init);
    called("HEAD", path, head.response);
}

async function persons(): Promise<void> {
    const path1 = "/api/v{version}/PersonAccounts/{id}/get";
    const account = await client.GET(path1, {
        params: { path: { version: "1",
                          id: "b1000000-0000-4000-8000-000000000001" },
                  header: { "Accept-Language": "en" } },
        headers: bearer,
    });
    called("GET", path1, account.response);
    const a = account.data?.data;
    check("account: succeeded", account.data?.succeeded === true);
    check("account: its balance", a?.availableBalance === 250000, a);
    check("account: its name", a?.accountName === "Amaka Nwankwo", a);

    const head = await client.HEAD(path1, {
        params: { path: { version: "1",
                          id: "b1000000-0000-4000-8000-000000000001" } },
        headers: bearer,
    });
    called("HEAD", path1, head.response);

    const path2 = "/api/v{version}/PersonDocuments/update";
    const update = await client.PUT(path2, {
        params: { path: { version: "1" } },
        headers: bearer,
        body: { documentId: "71000000-0000-4000-8000-000000000002",
                personId: "c1000000-0000-4000-8000-000000000001",
                fileName: "bill.txt", base64: "SGVsbG8sIHdvcmxkIQ==" },
    });
    called("PUT", path2, update.response);
    const doc = update.data?.data;
    check("document: its file", doc?.fileName === "bill.txt", doc);
    check("document: its type, a number", typeof doc?.type === "number",
          doc);

    const path3 = "/api/v{version}/PersonDocuments/{id}/delete";
    const id = "71000000-0000-4000-8000-000000000003";
    const del = await client.DELETE(path3, {
        params: { path: { version: "1", id } },
        headers: bearer,
    });
    called("DELETE", path3, del.response);
    const deleted: string | undefined = del.data?.data;
    check("document deleted: its id", deleted === id, deleted);
}

async function transfers(): Promise<void> {
    const path = "/api/v{version}/BankTransfers/all-account";
    const init = {
        params: { path: { version: "1" as const },
                  query: { PageNumber: 1, PageSize: 5 } },
        headers: bearer,
    };

    const got = await client.GET(path, init);
    called("GET", path, got.response);
    const page = got.data;
    check("transfers: the page", page?.pageNumber === 1
          && page.pageSize === 5 && page.total >= page.data.length, page);
    const bank: string | undefined = page?.data[0]?.account.bankName;
    check("transfers: an account's bank", typeof bank === "string", bank);

    const post = await client.POST(path, init);
    called("POST", path, post.response);
    check("transfers: POST as GET", JSON.stringify(post.data?.data)
          === JSON.stringify(page?.data), post.data);

    const head = await client.HEAD(path, init);
    called("HEAD", path, head.response);
}

async function invoices(): Promise<void> {
    const path = "/api/v{version}/InvoiceSetting/DeleteInvoiceTax";
    const { response } = await client.DELETE(path, {
        params: { path: { version: "1" },
                  query: { TaxSettingId:
                           "f1000000-0000-4000-8000-000000000003" } },
        headers: bearer,
    });
    called("DELETE", path, response);
    check("tax setting deleted: no body",
          response.headers.get("Content-Length") === "0",
          response.headers.get("Content-Length"));
}

async function counterparties(): Promise<void> {
    const path1 = "/api/v{version}/Counterparties/accounts";
    const account = await client.PUT(path1, {
        params: { path: { version: "1" } },
        headers: bearer,
        body: { id: "82000000-0000-4000-8000-000000000001",
                bankName: "GTBank" },
    });
    called("PUT", path1, account.response);
    const a = account.data?.data;
    check("counterparty account: its bank", a?.bankName === "GTBank", a);
    check("counterparty account: its merchant",
          a?.merchantId === "91000000-0000-4000-8000-000000000001", a);

    const path2 = "/api/v{version}/Counterparties/groups";
    const group = await client.POST(path2, {
        params: { path: { version: "1" } },
        headers: bearer,
        body: { name: "Cocoa buyers",
                members: [ { counterpartyId:
                             "81000000-0000-4000-8000-000000000004" } ] },
    });
    called("POST", path2, group.response);
    check("counterparty group: its name",
          group.data?.data.name === "Cocoa buyers", group.data);
}

async function taskRequests(): Promise<void> {
    const path1 = "/api/v1/task-requests/{id}/assign-sampler";
    const assigned = await client.PATCH(path1, {
        params: { path: { id: "61000000-0000-4000-8000-000000000001" },
                  header: { ...tenancy, userId: "lab-admin-1" } },
        body: { samplerId: "51000000-0000-4000-8000-000000000002",
                priority: "HIGH", dueDate: "2099-12-01",
                pickupAddress: "12 Ikorodu Road, Mile 12, Lagos" },
    });
    called("PATCH", path1, assigned.response);
    const status: "ASSIGNED" | undefined = assigned.data?.status;
    check("task: assigned", status === "ASSIGNED", assigned.data);
    check("task: its sampler", assigned.data?.samplerId
          === "51000000-0000-4000-8000-000000000002", assigned.data);

    const path2 = "/api/v1/task-requests/{id}/toggle-accept-reject";
    const toggled = await client.PATCH(path2, {
        params: { path: { id: "61000000-0000-4000-8000-000000000002" },
                  header: { ...tenancy, userId: "sampler-user-1" } },
        body: { status: "ACCEPTED", samplerOrLaboratoryId:
                "51000000-0000-4000-8000-000000000001" },
    });
    called("PATCH", path2, toggled.response);
    check("task: accepted", toggled.data?.status === "ACCEPTED",
          toggled.data);
}

async function webhooks(): Promise<void> {
    const path1 = "/api/v1/webhooks/public/{source}/events";
    const init = {
        params: { path: { source: "source-a" } },
        headers: { apiKey: cfg.webhookKey },
        // an event of the source's own shape: any members
        body: { id: "evt_client_1", type: "order.paid",
                amount: { value: 1200, currency: "NGN" } },
    };

    for (const again of [false, true]) {
        const { data, response } = await client.POST(path1, init);
        called("POST", path1, response);
        const receipt = data?.data;
        if (receipt && !receipt.duplicate) {
            const id: number = receipt.id;
            check("webhook: stored, its id", !again && id > 0, receipt);
        } else {
            check("webhook: the same event, a duplicate",
                  again && receipt?.duplicate === true, receipt);
        }
    }

    const path2 = "/api/webhooks/public/{source}/events";
    const pub = await client.POST(path2, {
        params: { path: { source: "source-b" } },
        body: { eventId: "b-client-1", status: "ok", lines: [1, 2, 3] },
    });
    called("POST", path2, pub.response);
    check("webhook b: received", pub.data?.message === "Event received.",
          pub.data);

    const path3 = "/webhooks/{paymentmethod}";
    const pay = await client.POST(path3, {
        params: { path: { paymentmethod: "card" } },
        headers: { apiKey: cfg.webhookKey },
        body: { reference: "T-client-1", status: "success", paid: true },
    });
    called("POST", path3, pay.response);
    check("payment webhook: received", pay.data?.data.duplicate === false,
          pay.data);
}

async function sales(): Promise<void> {
    const path = "/sales/transactions";
    const { data, response } = await client.PATCH(path, {
        headers: bearer,
        body: { saleId: "aa100000-0000-4000-8000-000000000001",
                transactionReference: "PAY-CLIENT-1", amount: 2500.5,
                paymentMethod: "TRANSFER" },
    });
    called("PATCH", path, response);
    const sale: Schemas["SaleDocument"] | undefined = data?.data;
    check("sale: its message", data?.message === "Sale transaction updated.",
          data?.message);
    check("sale: one page of one", data?.meta.total === 1
          && data.meta.lastPage === 1, data?.meta);
    check("sale: partly paid", sale?.paymentStatus === "PARTIALLY_PAID",
          sale?.paymentStatus);
    check("sale: its total", sale?.totalAmount === 12825, sale?.totalAmount);
    check("sale: the amount paid", sale?.sale.amountPaid === 2500.5,
          sale?.sale.amountPaid);

    const t: Schemas["SaleTransaction"] | undefined = sale?.sale
        .saleTransaction;
    check("sale: the transaction's reference",
          t?.transactionReference === "PAY-CLIENT-1", t);
    check("sale: the transaction's amount", t?.amount === 2500.5, t);
    check("sale: no retry scheduled", t?.nextRetry === null, t?.nextRetry);
    check("sale: settlement not scheduled",
          sale?.sale.settlementAttemptNextRetry === null, sale?.sale);

    const products: Schemas["SaleProduct"][] = sale?.products ?? [];
    check("sale: its products", products.length === 2
          && products[0]?.productName === "Parboiled rice 50kg", products);
    const detail: Schemas["SaleDetail"] | undefined =
        sale?.sale.saleDetails[0];
    check("sale: a detail's product",
          detail?.product.sellingPrice?.price === 4000, detail?.product);
    check("sale: a promotion, as stored",
          detail?.product.promotion?.name === "No promotion",
          detail?.product.promotion);
    check("sale: the seller's wallet, as stored",
          typeof sale?.seller.wallet?.userId === "string", sale?.seller);
    check("sale: the customer's businesses",
          (sale?.customer.businesses ?? []).length > 0, sale?.customer);
}

async function identity(): Promise<void> {
    const path =
        "/api/v{version}/Identity/verification/business-credit-bureau";
    const { data, response } = await client.POST(path, {
        params: { path: { version: "1" } },
        headers: bearer,
        body: { rc_number: "RC100001",
                customer_name: "Demo Foods Limited" },
    });
    called("POST", path, response);
    check("identity: verified",
          data?.data.verificationStatus === "VERIFIED", data);
    check("identity: the company", data?.data.companyName
          === "Demo Foods Limited", data?.data);
}

await otp();
await products();
await tms();
await trades();
await persons();
await transfers();
await invoices();
await counterparties();
await taskRequests();
await webhooks();
await sales();
await identity();

if (failed) {
    process.exitCode = 1;
}
